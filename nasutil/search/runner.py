"""Run a study's trials from several threads at once, through Optuna's ask-and-tell interface.

Optuna's `optimize(n_jobs=N)` gives each thread's trials a freshly reseeded sampler, so a search of
several trials at once is not reproducible from its seed. Here one sampler, seeded once, is asked
from one thread at a time, and each trial's parameters are drawn (`begin`) in the same turn as its
ask: the proposals follow the seed and what the study held at each ask. With one thread a search is
reproducible from its seed; with several, what a proposal could see depends on which trials finished
first (docs/search.md says exactly what stays fixed).

Threads the budget refuses wait in line: an end (or a nudge) wakes one of them, and that one passes the
turn on only when it could ask, so a population's hundreds of idle threads do not each wake, take the
interpreter and read the budget at every end; one of them (the poller) looks again every `poll_s`.

A trial's heartbeat (where the storage keeps them) runs while its objective runs, and stale trials of
dead workers are failed before each ask, as `optimize` does; on a study journal, the trial is stamped
instead (`nasutil.search.liveness`).

A trial's own failure is recorded as FAIL and the run goes on; anything else that goes wrong in a trial
thread (the storage refusing an ask or a tell, a callback raising) ends the run: the other threads ask no
more, the trials running then finish, and `run` raises the first such error. An error left in a thread
would only be printed there, and the run would end as if its budget were spent.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from nasutil.search.liveness import stamped_while_running
from nasutil.search.storage import fail_stale_and_orphaned_trials

_logger = logging.getLogger(__name__)

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
                 may_ask: Callable[[], bool] | None = None, poll_s: float = 0.5,
                 max_idle_s: float = 600.0, on_interrupt: Callable[[], None] | None = None,
                 grace_s: float = 60.0) -> None:
        self.study, self.objective, self.begin = study, objective, begin
        self.on_interrupt, self.grace_s = on_interrupt, grace_s
        self.may_ask, self.poll_s, self.max_idle_s = may_ask, poll_s, max_idle_s
        self.workers, self.max_trials, self.timeout_s = max(1, int(workers)), int(max_trials), timeout_s
        self.callbacks, self.catch = list(callbacks), catch
        self._ask_turn = threading.Lock()  # one ask (and its parameters) at a time
        self._told = threading.Lock()  # callbacks one at a time
        self._asked = 0
        self._running = 0  # this run's trials between their ask and their tell
        self._ends = 0  # trials of this run that ended: a refusal older than the last end is looked at again
        self._refused: tuple[int, float] | None = None  # (ends, time) of the last refusal to ask
        self._idle_since: float | None = None  # refused with none of this run's trials running, since
        self._ended = threading.Condition()  # a trial of this run ended: a place in the budget may be free
        self._wakes = 0  # ends, nudges and turns passed on, counted under `_ended`: no wake-up is missed
        self._polling = False  # a waiting thread looks at the budget every `poll_s`; the others wait for a turn
        self._stopped = threading.Event()
        self._error: BaseException | None = None
        self._recording = threading.Lock()  # a trial's end being stored; held to leave the running ones as they are
        self._left_running = False  # a second Ctrl-C cut the grace short: running trials are not recorded

    def stop(self) -> None:
        self._stopped.set()
        self._wake(everyone=True)

    def nudge(self) -> None:
        """Something `may_ask` reads has changed (a trial had its first result): look again now, not at the
        next end or poll."""
        self._refused = None
        self._wake()

    def _wake(self, everyone: bool = False) -> None:
        """One waiting thread looks at the budget (it passes the turn on if it could ask); `everyone`
        when the run is ending and every thread must see it."""
        with self._ended:
            self._wakes += 1
            if everyone:
                self._ended.notify_all()
            else:
                self._ended.notify()

    def _wait_for_turn(self, seen: int) -> None:
        """Wait until something may have freed the budget since wake-up count `seen`; the poller also wakes
        every `poll_s` (the budget may be freed elsewhere: another process's trials)."""
        with self._ended:
            if self._wakes != seen:
                return
            if self._polling:
                self._ended.wait(timeout=max(30 * self.poll_s, 5.0))  # the poller passes the turn on
                return
            self._polling = True
            try:
                self._ended.wait(timeout=self.poll_s)
            finally:
                self._polling = False

    def run(self) -> None:
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        ended = [threading.Event() for _ in range(self.workers)]
        threads = [threading.Thread(target=self._work_then_set, args=(deadline, done), name=f"trial-worker-{i}",
                                    daemon=True) for i, done in enumerate(ended)]
        try:  # a Ctrl-C while the threads start (start() waits for each) must stop the ones already running too
            for thread in threads:
                thread.start()
            for done in ended:
                while not done.wait(timeout=0.5):
                    pass
        except BaseException:  # Ctrl-C: no more asks, and the running trials are stopped
            self._stopped.set()
            self._stop_running([done for thread, done in zip(threads, ended) if thread.ident is not None])
            raise
        if self._error is not None:
            raise self._error

    def _stop_running(self, ended: list[threading.Event]) -> None:
        """`on_interrupt` stops what the running trials do (their trials fail with its reason), and their
        threads get up to `grace_s` to record that: a process that exits while they run native code (a
        training step) is aborted by the C++ runtime, and their trials would stay RUNNING. A trial not
        stopped by then, or by a second Ctrl-C that cuts the wait short, stays RUNNING for good (it is not
        recorded later, so what the caller reports next is what the storage keeps), and a resume fails it.
        (Each thread's end is an Event, not `Thread.join`: a join that a Ctrl-C interrupts marks the thread
        as ended while it still runs.)"""
        if self.on_interrupt is None:
            return
        self.on_interrupt()
        deadline = time.monotonic() + self.grace_s
        try:
            for done in ended:
                while not done.wait(timeout=0.1) and time.monotonic() < deadline:
                    pass
        finally:  # waited enough (or a second Ctrl-C): the trials running now are left as they are stored
            with self._recording:
                self._left_running = True

    def _work_then_set(self, deadline: float | None, done: threading.Event) -> None:
        try:
            self._work(deadline)
        except BaseException as exc:  # the storage refused an ask (a trial's own failure never gets here)
            self._end_with(exc)
        finally:
            done.set()
            self._wake(everyone=True)  # whatever ended this thread's work (budget spent, stop, deadline) ends theirs

    def _work(self, deadline: float | None) -> None:
        from optuna.storages._heartbeat import get_heartbeat_thread

        while True:
            with self._ask_turn:
                seen = self._wakes
                if self._stopped.is_set() or self._asked >= self.max_trials or self._error is not None:
                    return
                if deadline is not None and time.monotonic() >= deadline:
                    return
                trial = self._ask() if self._allowed() else None
                if trial is not None:
                    try:
                        begun = self.begin(trial) if self.begin is not None else None
                        failure = None
                    except Exception as exc:  # the trial fails; the run goes on
                        begun, failure = None, exc
                elif self._running:
                    self._idle_since = None
                elif self._idle_too_long():
                    return  # the budget is held by other workers' trials, and has been for a long time
            if trial is None:  # the budget is held by running trials: ask again once one of them ends
                self._wait_for_turn(seen)
                continue
            self._wake()  # the budget had room for this one: the next in line may find room too
            with get_heartbeat_thread(trial._trial_id, self.study._storage), \
                    stamped_while_running(self.study._storage, trial._trial_id):
                values, state, failure = self._call(trial, begun, failure)
            with self._recording:
                frozen = None if self._left_running else self._tell(trial, values, state, failure)
            with self._ended:
                self._running -= 1
                self._ends += 1
            self._wake()
            if frozen is None:
                continue
            with self._told:
                try:
                    for callback in self.callbacks:
                        callback(self.study, frozen)
                except BaseException as exc:  # a callback's own error ends the run
                    self._end_with(exc)
                    return

    def _end_with(self, error: BaseException) -> None:
        """End the run with `error`, which no trial's record can hold: the other threads ask no more, and `run`
        raises the first such error once the trials running now have ended."""
        with self._ended:
            if self._error is None:
                self._error = error
        self.stop()

    def _allowed(self) -> bool:
        """Whether the budget lets this run ask now. A refusal stands until a trial of this run ends or
        `poll_s` passes, so that many waiting threads do not each read the whole study."""
        if self.may_ask is None:
            return True
        now = time.monotonic()
        if self._refused is not None and self._refused[0] == self._ends and now - self._refused[1] < self.poll_s:
            return False
        if self.may_ask():
            self._refused, self._idle_since = None, None
            return True
        self._refused = (self._ends, now)
        return False

    def _idle_too_long(self) -> bool:
        """Refused while none of this run's trials runs: a worker killed without heartbeats leaves its trials
        running for ever, so waiting on other workers' trials ends after `max_idle_s`."""
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
        return now - self._idle_since > self.max_idle_s

    def _ask(self) -> optuna.Trial:
        fail_stale_and_orphaned_trials(self.study)  # where the storage keeps heartbeats, as `optimize` does
        trial = self.study.ask()
        self._asked += 1
        with self._ended:
            self._running += 1
        return trial

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
            self._end_with(exc)
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
        except UpdateFinishedTrialError:
            # Another worker (or this one, before its ask) failed the trial as stale: its heartbeat missed the
            # grace period. The storage holds that verdict and the trial is retried; the run goes on.
            _logger.warning("trial %d was failed as stale while it ran (its heartbeat missed the grace period); "
                            "its result is not recorded", trial.number)
            return None
        except Exception as exc:  # the storage itself failed: nothing more can be recorded
            self._end_with(exc)
            return None
