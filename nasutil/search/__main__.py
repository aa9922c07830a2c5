"""`python -m nasutil.search`: the same Hydra app as the `nasutil-search` command."""

import sys

from nasutil.cli.search_command import main

if __name__ == "__main__":
    sys.exit(main())
