"""`python -m nasutil.search`: the same Hydra app as the `nasutil-search` command."""

import sys

from nasutil.cli.entry import nasutil_search

if __name__ == "__main__":
    sys.exit(nasutil_search())
