"""Run a study's trials from several threads at once, through Optuna's ask-and-tell interface.

Optuna's `optimize(n_jobs=N)` gives each thread's trials a freshly reseeded sampler, so a search of
several trials at once is not reproducible from its seed. Here one sampler, seeded once, is asked
from one thread at a time, and each trial's parameters are drawn (`begin`) in the same turn as its
ask: the proposals follow the seed and what the study held at each ask. With one thread a search is
reproducible from its seed; with several, what a proposal could see depends on which trials finished
first (docs/search.md says exactly what stays fixed).

A trial's heartbeat (where the storage keeps them) runs while its objective runs, and stale trials of
dead workers are failed before each ask, as `optimize` does.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

# Heartbeats run here as `optimize` runs them: Optuna's notice that they belong to `optimize` does not apply.
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")

Objective = Callable[[optuna.Trial, Any], Sequence[float]]
Begin = Callable[[optuna.Trial], Any]
Callback = Callable[[optuna.Study, FrozenTrial], None]


class TrialRunner:
    """Up to `max_trials` trials, `workers` at a time; `stop()` (from a callback, say) lets the running
    trials finish and asks no more. `begin(trial)` runs in the ask's turn and its result is handed to
    `objective(trial, begun)`; `callbacks` see every finished trial, one at a time."""

    def __init__(self, study: optuna.Study, objective: Objective, *, workers: int = 1, max_trials: int,
                 timeout_s: float | None = None, begin: Begin | None = None,
                 callbacks: Sequence[Callback] = (), catch: tuple[type[BaseException], ...] = (Exception,),
                 may_ask: Callable[[], bool] | None = None, poll_s: float = 0.5) -> None:
        self.study, self.objective, self.begin = study, objective, begin
        self.may_ask, self.poll_s = may_ask, poll_s
        self.workers, self.max_trials, self.timeout_s = max(1, int(workers)), int(max_trials), timeout_s
        self.callbacks, self.catch = list(callbacks), catch
        self._ask_turn = threading.Lock()  # one ask (and its parameters) at a time
        self._told = threading.Lock()  # callbacks one at a time
        self._asked = 0
        self._ended = threading.Condition()  # a trial of this run ended: a place in the budget may be free
        self._stopped = threading.Event()
        self._error: BaseException | None = None

    def stop(self) -> None:
        self._stopped.set()
        with self._ended:
            self._ended.notify_all()

    def run(self) -> None:
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        threads = [threading.Thread(target=self._work, args=(deadline,), name=f"trial-worker-{i}", daemon=True)
                   for i in range(self.workers)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.5)
        except BaseException:  # Ctrl-C: no more asks; running trials stay RUNNING (a resume fails them)
            self._stopped.set()
            raise
        if self._error is not None:
            raise self._error

    def _work(self, deadline: float | None) -> None:
        from optuna.storages._heartbeat import get_heartbeat_thread, is_heartbeat_enabled

        heartbeats = is_heartbeat_enabled(self.study._storage)
        while True:
            with self._ask_turn:
                if self._stopped.is_set() or self._asked >= self.max_trials or self._error is not None:
                    return
                if deadline is not None and time.monotonic() >= deadline:
                    return
                trial = None
                if self.may_ask is None or self.may_ask():
                    if heartbeats:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            optuna.storages.fail_stale_trials(self.study)
                    trial = self.study.ask()
                    self._asked += 1
                    try:
                        begun = self.begin(trial) if self.begin is not None else None
                        failure = None
                    except Exception as exc:  # the trial fails; the run goes on
                        begun, failure = None, exc
            if trial is None:  # the budget is held by running trials: ask again once one of them ends
                with self._ended:
                    self._ended.wait(timeout=self.poll_s)
                continue
            with get_heartbeat_thread(trial._trial_id, self.study._storage):
                values, state, failure = self._call(trial, begun, failure)
            frozen = self._tell(trial, values, state, failure)
            with self._ended:
                self._ended.notify_all()
            if frozen is None:
                continue
            with self._told:
                try:
                    for callback in self.callbacks:
                        callback(self.study, frozen)
                except BaseException as exc:  # a callback's own error ends the run
                    self._error = exc
                    return

    def _call(self, trial: optuna.Trial, begun: Any,
              failure: BaseException | None) -> tuple[Sequence[float] | None, TrialState, BaseException | None]:
        if failure is not None:
            return None, TrialState.FAIL, failure
        try:
            return self.objective(trial, begun), TrialState.COMPLETE, None
        except optuna.TrialPruned:
            return None, TrialState.PRUNED, None
        except self.catch as exc:
            return None, TrialState.FAIL, exc
        except BaseException as exc:  # not caught: fail the trial, then end the run with it
            self._error = exc
            self._stopped.set()
            return None, TrialState.FAIL, exc

    def _tell(self, trial: optuna.Trial, values: Sequence[float] | None, state: TrialState,
              failure: BaseException | None) -> FrozenTrial | None:
        try:
            if state == TrialState.COMPLETE:
                try:
                    return self.study.tell(trial, values)
                except ValueError as exc:  # values Optuna cannot store (NaN, say): the trial fails
                    trial.set_user_attr("fail_reason", f"objective values not accepted: {exc}")
                    return self.study.tell(trial, state=TrialState.FAIL)
            if state == TrialState.FAIL and failure is not None and "fail_reason" not in trial.user_attrs:
                text = f"{type(failure).__name__}: {failure}".splitlines()[0]
                self.study._storage.set_trial_system_attr(trial._trial_id, "fail_reason", text)
            return self.study.tell(trial, state=state)
        except Exception as exc:  # the storage itself failed: nothing more can be recorded
            self._error = exc
            self._stopped.set()
            return None
