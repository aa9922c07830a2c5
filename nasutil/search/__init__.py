"""Multi-objective NAS with Optuna that prunes candidates on predicted utilization before training them.

`build_search(cfg, folder)` makes a search from a Hydra config (see `conf/`); `Search.run` runs it;
`report_search` writes its tables, plots and summary. The front door is `nasutil-search`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasutil.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from nasutil.search.build import SearchSetup, build_search
    from nasutil.search.controller import Search
    from nasutil.search.record import Counts, TrialRecord, outcome
    from nasutil.search.report import report_search

__all__ = ["Counts", "Search", "SearchSetup", "TrialRecord", "build_search", "outcome", "report_search"]

# Each name is imported on first use, so that `python -m nasutil.search` starts before torch loads.
__getattr__, __dir__ = lazy_attributes(__name__, {
    "SearchSetup": "nasutil.search.build", "build_search": "nasutil.search.build",
    "Search": "nasutil.search.controller",
    "Counts": "nasutil.search.record", "TrialRecord": "nasutil.search.record", "outcome": "nasutil.search.record",
    "report_search": "nasutil.search.report",
})
