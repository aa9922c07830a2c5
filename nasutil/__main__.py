import sys

from nasutil.cli import main

sys.exit(main())
