"""`nasutil-search`: multi-objective NAS with Optuna that skips candidates before training them.

Each trial: the search space suggests an architecture through the Optuna trial, a predictor scores
it (latency, throughput, utilization on the target GPU), a prune policy may end it before training,
survivors are trained (a table lookup or real training) and, where a GPU is present, measured; the
objectives go back to the study. `app.main` is the Hydra entry point, `controller.Search` the loop.
"""
