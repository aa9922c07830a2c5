"""Multi-objective NAS with Optuna that prunes candidates on predicted utilization before training them.

`build_search(cfg, folder)` makes a search from a Hydra config (see `conf/`); `Search.run` runs it;
`report_search` writes its tables, plots and summary. The front door is `nasutil-search`.
"""

from nasutil.search.build import SearchSetup, build_search
from nasutil.search.controller import Search
from nasutil.search.record import Counts, TrialRecord, outcome
from nasutil.search.report import report_search

__all__ = ["Counts", "Search", "SearchSetup", "TrialRecord", "build_search", "outcome", "report_search"]
