import sys

from nasutil.cli.entry import nasutil

sys.exit(nasutil())
