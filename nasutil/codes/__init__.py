"""Learned coded computation: rebuild a deployed classifier's unavailable predictions.

A code takes k queries, adds r parity queries (an encoder), runs them through the base or a parity
model, and rebuilds any one unavailable output from the rest (a decoder). Learned codes train the
encoder and decoder; parity models train the parity network behind fixed ones.

    from nasutil.codes import CodeSpec, RunSettings, train_run
    scores = train_run(RunSettings(base="mlp", dataset="fashion_mnist", code=CodeSpec(k=2)), Path("run"))
    print(scores.reconstruction_accuracy, scores.degraded_accuracy)

`serve` runs a trained code beside its base on one device (the parity work co-located on its own
stream) and reports latency, throughput and the accuracy of what it served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasutil.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from nasutil.codes.code import Code
    from nasutil.codes.metrics import CodeScores, score_code
    from nasutil.codes.run import evaluate_run, train_run
    from nasutil.codes.serving import ServingResult, serve
    from nasutil.codes.settings import CodeSpec, JobSettings, RunSettings

__all__ = ["Code", "CodeScores", "CodeSpec", "JobSettings", "RunSettings", "ServingResult", "evaluate_run",
           "score_code", "serve", "train_run"]

__getattr__, __dir__ = lazy_attributes(__name__, {
    "Code": "nasutil.codes.code", "CodeSpec": "nasutil.codes.settings", "CodeScores": "nasutil.codes.metrics",
    "score_code": "nasutil.codes.metrics", "RunSettings": "nasutil.codes.settings",
    "JobSettings": "nasutil.codes.settings", "evaluate_run": "nasutil.codes.run",
    "train_run": "nasutil.codes.run", "serve": "nasutil.codes.serving", "ServingResult": "nasutil.codes.serving",
})
