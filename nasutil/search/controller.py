"""The search loop: one Optuna trial per candidate, pruned on predictions before any training.

Per trial: the space suggests an arch through the trial; the predictor scores it; the prune policy
may end it (`prune_stage=before_training`, with its reason); otherwise it is trained (an Optuna
pruner may stop it early: `prune_stage=during_training`), measured where a GPU is configured, and its
objective values go to the study. Everything a trial learned is stored as its user attributes, so
outputs, resumed runs and policies read it back from the storage alone.

How a pruned trial is told to the sampler (`pruned_as`):

- `pruned`: Optuna state PRUNED. Genetic samplers (NSGA-II/III) build each generation from COMPLETE
  trials only, so a pruned trial is invisible to them: with half the candidates pruned, a search
  of the same length evolves about half as many generations, and selection never learns that the
  pruned candidates were bad.
- `predicted`: state COMPLETE with the predicted objective values: the hardware figures the
  predictor gave and, for accuracy, the policy's estimate (`PrunePolicy.estimate`; for
  `dominated_throughput` the accuracy it predicted the candidate at most reaches, capped so that
  the front member that dominates it still does). The sampler ranks the candidate where the policy
  placed it, as in surrogate-assisted evolution. Where the policy gives no estimate (or a pruner
  stopped the training), the trial is recorded as `infeasible` instead.
- `infeasible`: state COMPLETE with a violated constraint `pruned` (1.0), the predicted hardware
  figures as objective values and the worst value for what only training gives (accuracy 0). It
  fills its generation, and constrained domination ranks it below every feasible (trained) trial.

Either way it stays a pruned trial everywhere else: `prune_stage` says so, `outcome` (in
trials.csv) says `pruned_before_training`, it costs no training, and it never enters the Pareto
front, the hypervolume or a policy's history of trained candidates.

`auto` picks `predicted` for genetic samplers and `pruned` for the others (random, TPE, GP), where
PRUNED is already handled (TPE ranks pruned trials below complete ones; random search ignores
results).
"""

from __future__ import annotations

import datetime
import math
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import optuna
from optuna.trial import FrozenTrial, TrialState

from nasutil.arch import Arch
from nasutil.errors import NasutilError
from nasutil.predictor import Predictor, PredictTarget
from nasutil.search.halving import Halving
from nasutil.search.measurer import HardwareMeasurer, MeasurementQueue, NoMeasurement
from nasutil.search.objectives import Objectives
from nasutil.search.prune import History, PrunePolicy, Seen, history_from
from nasutil.search.rung_informed import RUNG_VALUES
from nasutil.search.runner import TrialRunner
from nasutil.search.storage import (fail_stale_and_orphaned_trials, has_heartbeats, running_twin, state_counts,
                                    stopped_mid_search, tells_dead_workers, unnamed_running, worker_alive,
                                    write_user_attrs)
from nasutil.search.record import (FINISHED, PRUNED_CONSTRAINT, Counts, TrialRecord, hardware_figures,
                                   outcome, predicted_figures, with_accuracy)
from nasutil.search.trainers import Trainer

PRUNED_AS = ("auto", "pruned", "infeasible", "predicted")


def resolve_pruned_as(choice: str, sampler: optuna.samplers.BaseSampler | None) -> str:
    """`pruned`, `infeasible` or `predicted` for the config's `pruned_as`: `auto` picks `predicted`
    for genetic samplers, whose generations count COMPLETE trials only, and `pruned` for the rest."""
    if choice not in PRUNED_AS:
        raise NasutilError(f"pruned_as must be one of {', '.join(PRUNED_AS)}, got {choice!r}")
    if choice != "auto":
        return choice
    genetic = (optuna.samplers.NSGAIISampler, optuna.samplers.NSGAIIISampler)
    return "predicted" if isinstance(sampler, genetic) else "pruned"


class _Pruned(Exception):
    """A trial ended without a final accuracy (by the policy or the pruner); carries the reason."""


class _Surplus(Exception):
    """A trial asked for after other workers of the study had claimed the whole budget."""


@dataclass
class _Begun:
    """What a trial took in its ask's turn."""

    earlier: list[FrozenTrial] = field(default_factory=list)  # the study's finished trials then
    arch: Arch | None = None
    error: BaseException | None = None


class StoppedEarly(Exception):
    """A training stopped before its end: by an Optuna pruner at step `step`, or cut at a rung
    (`epochs`: the training it had, in epochs; `reason`: why)."""

    def __init__(self, step: int, accuracy: float, pruner: str, epochs: float | None = None,
                 reason: str | None = None) -> None:
        super().__init__(reason or f"stopped at step {step} (accuracy {accuracy:.2f}%) by {pruner}")
        self.step, self.accuracy, self.pruner = step, accuracy, pruner
        self.epochs = float(step) if epochs is None else float(epochs)


class EarlyStopping:
    """Runs an Optuna pruner on intermediate accuracy, for single- and multi-objective studies alike.

    Optuna pruners read a single-objective study's intermediate values, and a multi-objective study
    accepts none, so the curves go to a companion in-memory study (maximise accuracy) that the
    pruner judges; it is rebuilt from the curves stored on the main study's trials when resuming.
    """

    def __init__(self, pruner: optuna.pruners.BasePruner | None, previous: list[FrozenTrial],
                 study_name: str = "early-stopping") -> None:
        self.pruner = pruner
        self.name = type(pruner).__name__ if pruner is not None else "none"
        self._lock = threading.Lock()  # the companion study is in memory; trials report from many threads
        # A fixed name: Hyperband assigns brackets by a hash of the study's name, which would otherwise be random.
        self.study = optuna.create_study(direction="maximize", pruner=pruner or optuna.pruners.NopPruner(),
                                         sampler=optuna.samplers.RandomSampler(seed=0), study_name=study_name)
        for t in previous:
            curve = {int(k): float(v) for k, v in (t.user_attrs.get("curve") or {}).items()}
            if not curve or t.state not in FINISHED:
                continue
            final = t.user_attrs.get("accuracy")
            complete = t.state == TrialState.COMPLETE and final is not None
            self.study.add_trial(optuna.create_trial(
                state=TrialState.COMPLETE if complete else TrialState.PRUNED,
                value=float(final) if complete else None, intermediate_values=curve))

    def start(self, curve: dict[str, float], rungs: Sequence[float] = (),
              on_rung: Callable[[float, float], None] | None = None) -> _Reporter:
        with self._lock:
            trial = self.study.ask()
        return _Reporter(self, trial, curve, tuple(rungs), on_rung)


class _Reporter:
    """What a trainer reports to: intermediate accuracy per step (the Optuna pruner's), and validation
    accuracy at the rungs it asks for (`rungs`, fractions of the training; `on_rung` may cut)."""

    def __init__(self, owner: EarlyStopping, trial: optuna.Trial, curve: dict[str, float],
                 rungs: tuple[float, ...] = (), on_rung: Callable[[float, float], None] | None = None) -> None:
        self.owner, self.trial, self.curve = owner, trial, curve
        self.rungs, self.on_rung = rungs, on_rung
        self.rung_accuracy: dict[str, float] = {}
        self.last_step = 0

    def report_rung(self, fraction: float, accuracy: float) -> None:
        self.rung_accuracy[f"{fraction:.6g}"] = float(accuracy)
        if self.on_rung is None:
            return
        try:
            self.on_rung(fraction, accuracy)
        except StoppedEarly:
            with self.owner._lock:
                self.owner.study.tell(self.trial, state=TrialState.PRUNED)
            raise

    def report(self, step: int, accuracy: float) -> None:
        self.curve[str(step)] = float(accuracy)
        self.last_step = step
        with self.owner._lock:
            self.trial.report(float(accuracy), step)
            stop = self.owner.pruner is not None and self.trial.should_prune()
            if stop:
                self.owner.study.tell(self.trial, state=TrialState.PRUNED)
        if stop:
            raise StoppedEarly(step, accuracy, self.owner.name)

    def finish(self, accuracy: float | None) -> None:
        with self.owner._lock:
            if accuracy is None:
                self.owner.study.tell(self.trial, state=TrialState.FAIL)
            else:
                self.owner.study.tell(self.trial, float(accuracy))


class Search:
    """One study and the parts that score, prune, train and measure its candidates."""

    def __init__(self, study: optuna.Study, space_spec: str, predictor: Predictor, target: PredictTarget,
                 policy: PrunePolicy, trainer: Trainer, objectives: Objectives,
                 measurer: HardwareMeasurer | None = None,
                 pruner: optuna.pruners.BasePruner | None = None, pruned_as: str = "auto", worker: int = 0,
                 device: str | None = None, halving: Halving | None = None,
                 anchors: list[dict] | None = None) -> None:
        from nasutil.registry import get_space

        self.study, self.space_spec, self.space = study, space_spec, get_space(space_spec)
        self.predictor, self.target, self.policy, self.trainer = predictor, target, policy, trainer
        self.objectives, self.measurer = objectives, measurer
        self.worker, self.device = worker, device  # recorded on every trial this process runs
        previous = study.get_trials(deepcopy=False)
        self.early = EarlyStopping(pruner, previous, f"{study.study_name}-early-stopping")
        self.halving = halving or Halving()
        self.halving.name_objectives(self.objectives.names)
        self.halving.remember(self._rung_values(previous), self.objectives.directions)
        self.pruned_as = resolve_pruned_as(pruned_as, study.sampler)
        self.measuring: HardwareMeasurer | MeasurementQueue | None = measurer
        concurrent = int(trainer.concurrent_trials)
        if measurer is not None and measurer.uses_device and concurrent > 1:  # never timed while a population trains
            self.measuring = MeasurementQueue(measurer, lambda: trainer.quiet(measurer.quiet_device),
                                              batch=max(1, min(8, concurrent // 4)),
                                              idle=lambda: trainer.idle(measurer.quiet_device))
        self.workers = concurrent + (self.measuring.batch if isinstance(self.measuring, MeasurementQueue) else 0)
        self._budget: int | None = None  # n_trials of the run under way
        self._started = datetime.datetime.now()  # when it began (Optuna stamps trials in local time)
        self._heartbeats = has_heartbeats(study)
        self._tells_dead = tells_dead_workers(study)  # by heartbeats, or by a journal's stamps
        self._runner: TrialRunner | None = None
        # a trial whose architecture another trial is training waits this long for that result
        self.twin_wait_s, self.twin_poll_s = 6 * 3600.0, 1.0
        # and this long for a trial asked before it to name its architecture (it is about to: it may be a twin)
        self.unnamed_wait_s, self.unnamed_poll_s = 10.0, 0.02
        self.anchors = list(anchors or [])  # trial parameters a fresh study runs first (nasutil.search.anchors)
        # trials asked with no result yet (no rung reached, not ended), and results this run has had
        self._unanswered: set[int] = set()
        self._answers = 0
        self._answers_lock = threading.Lock()
        # trials of this run that reached the first rung, by number, with their accuracy there: what a prune
        # policy judging at that rung knows of candidates still training (a finished trial's record has it)
        self._at_first_rung: dict[int, Seen] = {}

    def _rung_values(self, trials: list[FrozenTrial]) -> list[tuple[int, int, list[float]]]:
        """(rung, trial, objective values there) of earlier trials, for the halving policy to rank against."""
        out = []
        for t in trials:
            for key, accuracy in (t.user_attrs.get("rungs") or {}).items():
                fraction = float(key)
                rung = next((i for i, f in enumerate(self.halving.rungs) if abs(f - fraction) < 1e-6), None)
                if rung is not None:
                    out.append((rung, t.number, self._rung_objectives(t.user_attrs, accuracy)))
        return out

    def _rung_objectives(self, record: dict, accuracy: float) -> list[float]:
        """The objective values a candidate has at a rung: the rung's accuracy, predicted hardware figures."""
        predicted = {k: v for k, v in record.items() if not k.startswith("measured_") and k != "hardware_source"}
        figures = {**record, **hardware_figures(predicted),
                   "accuracy": accuracy}
        return self.objectives.values(figures, missing_as_worst=True)

    # -- one trial -------------------------------------------------------------------------------

    def begin(self, trial: optuna.Trial) -> _Begun:
        """In the ask's turn (one trial at a time, in order): the study as it stands, the trial's claim on
        the budget, and its architecture drawn from the sampler."""
        with self._answers_lock:
            self._unanswered.add(trial.number)
        try:
            trials = self.study.get_trials(deepcopy=False)  # one read of the storage per trial
            self._claim(trial, trials)
            return _Begun([t for t in trials if t.state in FINISHED], self.space.suggest(trial))
        except Exception as exc:
            return _Begun([], None, exc)

    def objective(self, trial: optuna.Trial, begun: _Begun | None = None) -> list[float]:
        record: TrialRecord = {"worker": self.worker, "device": self.device}
        try:
            return self._run_trial(trial, record, begun)
        finally:
            self._answered(trial.number)

    def _run_trial(self, trial: optuna.Trial, record: TrialRecord, begun: _Begun | None) -> list[float]:
        try:
            begun = begun if begun is not None else self.begin(trial)
            if begun.error is not None:
                raise begun.error
            return self._objective(trial, record, begun.earlier, begun.arch)
        except _Surplus as surplus:
            trial.set_user_attr("surplus", True)
            trial.set_user_attr("fail_reason", str(surplus))
            raise
        except _Pruned as pruned:
            return self._end_pruned(trial, record, str(pruned))
        except Exception as exc:
            with self._answers_lock:  # a failed trial is not training on, and no record of it is evidence
                self._at_first_rung.pop(trial.number, None)
            self._store(trial, record)
            reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, NasutilError) else str(exc)
            trial.set_user_attr("fail_reason", reason.splitlines()[0] if reason else type(exc).__name__)
            if not isinstance(exc, NasutilError):
                trial.set_user_attr("fail_traceback", traceback.format_exc(limit=-3))
            raise

    def _claim(self, trial: optuna.Trial, trials: list[FrozenTrial]) -> None:
        """Several workers share one study and one budget: a trial goes ahead only if fewer than `n_trials`
        trials numbered before it hold a place (trial numbers come from the storage, one each), so the
        study never holds more than `n_trials` finished trials, however many workers start together."""
        if self._budget is None:
            return
        ahead = sum(1 for t in trials if t.number < trial.number and self._holds(t))
        if ahead >= self._budget:
            raise _Surplus(f"not run: other workers had claimed all {self._budget} trials of the study")

    def _holds(self, t: FrozenTrial) -> bool:
        """Whether a trial holds a place in the budget: finished, waiting to be retried, or running. Where
        the storage keeps heartbeats, a dead worker's running trial is failed in time, so every running
        trial holds; without them (Optuna's journal, or heartbeats turned off) only one that started
        since this run began does, so that a trial left running by a killed process never blocks the
        study (the price: a worker joining while others' trials run may add one trial too many)."""
        if t.state in FINISHED or t.state == TrialState.WAITING:
            return True
        if t.state != TrialState.RUNNING:
            return False
        return self._heartbeats or (t.datetime_start is not None and t.datetime_start >= self._started)

    def _objective(self, trial: optuna.Trial, record: TrialRecord, earlier: list[FrozenTrial],
                   arch: Arch) -> list[float]:
        text = arch.to_string()
        trial.set_user_attr("arch", text)
        with self.trainer.host_turn():  # where candidates train together, the launching thread comes first
            scored = self.predictor.predict_many(self.space_spec, [arch], self.target)[0]
            history = self._history(earlier)
            reason = self.policy.decide(scored, history)
        record.update(predicted_figures(scored))
        if reason is not None:
            record.update(prune_stage="before_training", prune_policy=self.policy.name, prune_reason=reason,
                          training_epochs=0.0)
            if self.pruned_as == "predicted":
                record["estimated_accuracy"] = self.policy.estimate(scored, history)
            raise _Pruned(reason)

        same = next((t for t in earlier if outcome(t) == "trained" and t.user_attrs.get("arch") == text), None)
        if same is None:
            same = self._result_of_a_running_twin(trial, text)
        if same is not None:  # the sampler proposed an arch the study already trained: reuse, do not retrain
            keep = ("accuracy", "accuracy_detail", *(k for k in same.user_attrs if k.startswith("measured_")))
            record.update({k: same.user_attrs[k] for k in keep if k in same.user_attrs})
            record.update(duplicate_of=same.number, training_epochs=0.0)
        else:
            self._train(trial, text, record)
        if "accuracy" not in record:
            raise NasutilError("trainer returned no accuracy")
        if self.measuring is not None and "measured_latency_ms" not in record:
            record.update(self._measured(self.measuring, text))
        record["hardware_source"] = self.objectives.hardware_source(record)
        figures = {**record, **hardware_figures(record)}
        constraints = self.objectives.constraints(figures)
        if constraints:
            record["constraints"] = constraints
        values = self.objectives.values(figures)
        self._store(trial, record)
        if constraints and hasattr(trial, "set_constraint"):
            for key, value in constraints.items():
                trial.set_constraint(key, value)
        return values

    def _measured(self, measuring: HardwareMeasurer | MeasurementQueue, text: str) -> TrialRecord:
        """A trained candidate's measured figures. Where the evaluator holds none for it (a table without its
        cell), a trial that must be scored on measurements fails; one scored on `auto` (measured where
        measured) or `predicted` keeps its prediction and records why it has no measurement."""
        try:
            return measuring.measure(self.space_spec, text)
        except NoMeasurement as missing:
            if self.objectives.scored_on == "measured":
                raise NasutilError(f"{missing} (objectives.scored_on=measured: a trained trial without a "
                                   f"measurement fails; auto scores it on its prediction)") from None
            return {"unmeasured_reason": str(missing)}

    def _result_of_a_running_twin(self, trial: optuna.Trial, text: str) -> FrozenTrial | None:
        """Another trial (this process's or another worker's) numbered before this one is training the same
        architecture right now: wait for it and reuse its result, rather than train it twice. None where
        there is no such trial, it ended without a full training, or its worker died (then this trial
        trains), and where the storage cannot tell a dead worker's trial from a live one (a journal opened
        without a grace period: a dead worker's trial would be waited for)."""
        if not self._tells_dead:  # a twin whose worker died would stay RUNNING: nothing tells it from a slow one
            return None
        waiting = self._running_twin(trial, text)
        if waiting is None:
            return None
        deadline = time.monotonic() + self.twin_wait_s
        while time.monotonic() < deadline:
            time.sleep(self.twin_poll_s)
            fail_stale_and_orphaned_trials(self.study)  # a twin whose worker died is failed: this trial trains
            now = self.study._storage.get_trial(waiting)
            if now.state != TrialState.RUNNING:
                return now if outcome(now) in ("trained", "repeat") else None
            if not worker_alive(self.study, now):  # a journal's twin whose stamps stopped: this trial trains
                return None
        return None  # it runs on past the wait: train this one after all

    def _history(self, earlier: list[FrozenTrial]) -> History:
        """What the prune policy judges a candidate against: the finished trials, and this run's trials still
        training past the first rung (with their accuracy there)."""
        first = self.halving.rungs[0] if self.halving.rungs else None
        history = history_from([with_accuracy(t) for t in earlier], first)
        finished = {t.number for t in earlier}
        with self._answers_lock:
            running = [s for n, s in self._at_first_rung.items() if n not in finished]
        return History(history.seen + running)

    def _running_twin(self, trial: optuna.Trial, text: str) -> int | None:
        """The running twin `running_twin` finds. A trial asked before this one that has not named its
        architecture yet may be one (workers with one seed ask at the same moment, and the first pair was
        trained twice): this waits until every such trial has, for up to `unnamed_wait_s`. Each look asks
        whether one is unnamed before it looks for twins, so a trial named in between is not missed."""
        deadline = time.monotonic() + self.unnamed_wait_s
        while True:
            pending = unnamed_running(self.study, trial.number)
            twin = running_twin(self.study, text, trial.number)
            if twin is not None or not pending or time.monotonic() >= deadline:
                return twin
            time.sleep(self.unnamed_poll_s)

    def _train(self, trial: optuna.Trial, text: str, record: TrialRecord) -> None:
        curve: dict[str, float] = {}

        def at_rung(fraction: float, accuracy: float) -> None:
            rung = self.halving.rungs.index(fraction)
            values = self._rung_objectives(record, accuracy)
            if rung == 0:
                self._remember_first_rung(trial.number, text, record, fraction, accuracy)
            if self.halving.inform_sampler:  # what the sampler learns from while this candidate trains on
                trial.set_user_attr(RUNG_VALUES, values)
            self._answered(trial.number)
            cut = self.halving.decide(rung, trial.number, values, self.objectives.directions)
            if cut is not None:
                epochs = fraction * float(self.trainer.max_step)
                raise StoppedEarly(int(math.ceil(epochs)), accuracy, f"halving:{self.halving.name}", epochs, str(cut))

        reporter = self.early.start(curve, self.halving.rungs, at_rung if self.halving.rungs else None)
        try:
            result = self.trainer.train(self.space, text, reporter, trial_number=trial.number)
        except StoppedEarly as stop:
            policy = stop.pruner if stop.pruner.startswith("halving:") else f"pruner:{self.early.name}"
            record.update(prune_stage="during_training", prune_policy=policy, prune_reason=str(stop),
                          accuracy_partial=stop.accuracy, training_epochs=stop.epochs, curve=curve)
            if reporter.rung_accuracy:
                record["rungs"] = reporter.rung_accuracy
            raise _Pruned(str(stop)) from None
        except BaseException:
            reporter.finish(None)
            record.update(training_epochs=float(reporter.last_step), curve=curve)
            if reporter.rung_accuracy:
                record["rungs"] = reporter.rung_accuracy
            self._store(trial, record)
            raise
        reporter.finish(result.accuracy)
        record.update(accuracy=result.accuracy, training_epochs=result.epochs, curve=curve,
                      accuracy_detail=result.extra)
        if reporter.rung_accuracy:
            record["rungs"] = reporter.rung_accuracy

    def _remember_first_rung(self, number: int, text: str, record: TrialRecord, fraction: float,
                             accuracy: float) -> None:
        seen = history_from([{**record, "arch": text, "rungs": {f"{fraction:.6g}": accuracy}}], fraction).seen
        if seen:  # one record: one candidate, or none where the record holds no prediction to judge by
            with self._answers_lock:
                self._at_first_rung[number] = seen[0]

    def _end_pruned(self, trial: optuna.Trial, record: TrialRecord, reason: str) -> list[float]:
        """Store what the pruned trial learned, then end it as the sampler should learn of it: PRUNED,
        or COMPLETE with the policy's estimate or, without one, as infeasible (see the module
        docstring). It never gets an `accuracy`, so nothing downstream takes it for a trained one."""
        if self.pruned_as == "pruned":
            self._store(trial, record)
            raise optuna.TrialPruned(reason)
        figures = {**record, **hardware_figures(record)}
        figures["accuracy"] = record.get("estimated_accuracy")  # None unless pruned_as=predicted gave one
        infeasible = figures["accuracy"] is None
        constraints = {**({PRUNED_CONSTRAINT: 1.0} if infeasible else {}), **self.objectives.constraints(figures)}
        if constraints:
            record["constraints"] = constraints
        values = self.objectives.values(figures, missing_as_worst=True)
        self._store(trial, record)
        if hasattr(trial, "set_constraint"):
            for key, value in constraints.items():
                trial.set_constraint(key, value)
        return values

    def _store(self, trial: optuna.Trial, record: TrialRecord) -> None:
        """Everything the trial learned, written to the storage at once."""
        attrs = {key: value for key, value in record.items()
                 if value is not None and not (isinstance(value, float) and not math.isfinite(value))}
        write_user_attrs(self.study, trial._trial_id, attrs)
        record.clear()

    # -- the study -------------------------------------------------------------------------------

    def counts(self) -> Counts:
        return Counts.of(self.study.get_trials(deepcopy=False))

    def run(self, n_trials: int, timeout_s: float | None = None,
            on_trial: Callable[[Counts | None, FrozenTrial], None] | None = None, max_failures_in_a_row: int = 5,
            poll_s: float = 0.5, max_trainings: int | None = None, counts_for_on_trial: bool = True) -> Counts:
        """Run until the study holds `n_trials` finished (trained or pruned) trials, counting the trials of
        every worker that shares the study. A trial that fails is recorded with its reason and the search
        goes on, without counting it toward the budget; if the first `max_failures_in_a_row` trials of this
        run all fail, the cause is systematic (a broken predictor, say) and the run stops with that reason.
        A worker that finds the budget claimed by others waits while their trials run (one may fail and
        free its place) and stops once the study is complete. With `max_trainings`, the run also stops
        once the study holds that many trials that cost a training (trials running then finish).
        `on_trial(counts, trial)` sees every trial this run ends, with the study's counts, or None where
        `counts_for_on_trial` is off (reading every trial for them costs a population's driver its turn).
        A storage that stops working while the run goes on (it refuses an ask or a result) ends the run with a
        `StorageStopped` (a NasutilError) once the trials running then have ended; the trials it stored before
        stay."""
        before = self.counts()
        remaining = n_trials - before.finished
        if remaining <= 0 or (max_trainings is not None and before.trainings >= max_trainings):
            return before
        streak: list[str] = []
        succeeded = False

        def after(study: optuna.Study, trial: FrozenTrial) -> None:
            nonlocal succeeded
            counts: Counts | None = None

            def full() -> Counts:  # every trial read: only where something needs more than how many finished
                nonlocal counts
                if counts is None:
                    counts = Counts.of(study.get_trials(deepcopy=False))
                return counts

            if trial.user_attrs.get("surplus"):
                left = 600.0 if deadline is None else max(0.0, deadline - time.monotonic())
                counts = self._wait_for_others(study, n_trials, poll_s, min(600.0, left))
            elif trial.state == TrialState.FAIL:
                streak.append(str(trial.user_attrs.get("fail_reason") or trial.system_attrs.get("fail_reason", "")))
            else:
                succeeded = True
                streak.clear()
            if on_trial is not None:
                on_trial(full() if counts_for_on_trial else None, trial)
            finished = self._finished(study, counts, full)
            if finished >= n_trials or (not succeeded and len(streak) >= max_failures_in_a_row):
                self.stop()
            elif max_trainings is not None and full().trainings >= max_trainings:
                self.stop()

        self._enqueue_anchors()
        if self.measuring is not None:
            self.measuring.prepare()  # the measuring worker starts while the first candidates train
        self._budget, self._started = n_trials, datetime.datetime.now()
        with self._answers_lock:
            self._unanswered.clear()
            self._answers = before.finished  # a resumed study's results count as results
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        # Each failure spends an attempt; allow as many failed attempts as the budget itself. A trainer that
        # trains several candidates at once gets that many trials at once (and those it prepares ahead), but
        # never more threads than trials left: idle ones would only poll, and take the interpreter from the
        # thread that launches a population's steps.
        self._runner = TrialRunner(self.study, self.objective, workers=min(self.workers, remaining),
                                   max_trials=2 * remaining,
                                   timeout_s=timeout_s, begin=self.begin, callbacks=[after],
                                   may_ask=lambda: self._may_ask(n_trials), poll_s=poll_s,
                                   on_interrupt=self.trainer.interrupt)
        try:
            self._runner.run()
        except optuna.exceptions.StorageInternalError as exc:  # the trials it stored before stay
            raise stopped_mid_search(exc, self.study._storage) from exc
        finally:
            self._budget, self._runner = None, None
        if not succeeded and len(streak) >= max_failures_in_a_row:
            raise NasutilError(f"the first {len(streak)} trials of this run all failed (last: {streak[-1]})")
        if not succeeded and streak:  # fewer attempts than the streak allows (n_trials of 1 or 2): they ran out
            raise NasutilError(f"all {len(streak)} trials of this run failed (last: {streak[-1]})")
        return self.counts()

    def _finished(self, study: optuna.Study, counts: Counts | None, full: Callable[[], Counts]) -> int:
        """How many trials of the study are finished: from `counts` where they were read, else by one counting
        query (an RDB storage), else from every trial."""
        if counts is not None:
            return counts.finished
        by_state = state_counts(study)
        return full().finished if by_state is None else sum(by_state.get(state, 0) for state in FINISHED)

    def _answered(self, number: int) -> None:
        """A trial of this run has a result (a rung's, or its end): one more may be asked ahead."""
        with self._answers_lock:
            if number not in self._unanswered:
                return
            self._unanswered.discard(number)
            self._answers += 1
        if self._runner is not None:
            self._runner.nudge()

    def _ahead_of_results(self) -> bool:
        """Whether as many trials wait for a first result as the halving policy lets be asked ahead of
        results (`ask_ahead`, or the results so far where more): a sampler proposes the next from them."""
        limit = self.halving.ask_ahead
        if not limit or self.workers <= 1:
            return False
        with self._answers_lock:
            return len(self._unanswered) >= max(limit, self._answers)

    def _enqueue_anchors(self) -> None:
        """A fresh study runs the anchors first (worker 0 enqueues them, once)."""
        if not self.anchors or self.worker != 0 or self.study.get_trials(deepcopy=False):
            return
        for params in self.anchors:
            self.study.enqueue_trial(params, user_attrs={"anchor": True}, skip_if_exists=True)

    def stop(self) -> None:
        """Ask for no more trials; the running ones finish."""
        if self._runner is not None:
            self._runner.stop()

    def _may_ask(self, n_trials: int) -> bool:
        """Whether a place is open in the budget: `n_trials` less the trials that hold one (finished, or
        running: this process's, or another worker's). A worker asks for a trial only where one is open,
        so a study run by one process never asks past its budget; a worker that finds the study complete
        (other workers finished it) stops."""
        if self._ahead_of_results():
            return False
        if self._heartbeats:
            fail_stale_and_orphaned_trials(self.study)
            counts = state_counts(self.study)  # every running trial holds a place: counting them is enough
            if counts is not None:
                finished = sum(counts.get(state, 0) for state in FINISHED)
                if finished >= n_trials:
                    self.stop()
                    return False
                return self._open(finished + counts.get(TrialState.RUNNING, 0) < n_trials)
        trials = self.study.get_trials(deepcopy=False)
        if Counts.of(trials).finished >= n_trials:
            self.stop()
            return False
        # a WAITING trial (a retry, or one enqueued) is what the next ask returns: it holds no place yet
        return self._open(sum(1 for t in trials if self._holds(t) and t.state != TrialState.WAITING) < n_trials)

    def _open(self, open_: bool) -> bool:
        """`open_`, after telling the trainer where the budget is held by the trials running or ended: those
        are the last candidates, unless one fails and frees its place (`Trainer.closing`)."""
        if not open_:
            self.trainer.closing()
        return open_

    def _wait_for_others(self, study: optuna.Study, n_trials: int, poll_s: float, max_wait_s: float = 600.0) -> Counts:
        """After a surplus trial: wait until the study is complete, or until a place frees up (a running
        trial of another worker failed, or was failed as stale by its missed heartbeats and queued to be
        retried, which the next trial this worker asks for takes up); give up after
        `max_wait_s` (a worker killed without heartbeats leaves its trial running for ever)."""
        deadline = time.monotonic() + max_wait_s
        while True:
            fail_stale_and_orphaned_trials(study)  # where the storage keeps heartbeats
            trials = study.get_trials(deepcopy=False)
            counts = Counts.of(trials)
            if counts.finished >= n_trials:
                return counts
            if sum(self._holds(t) and t.state != TrialState.WAITING for t in trials) < n_trials:
                return counts  # a place is free, or a retry waits to be run: this worker takes it
            if time.monotonic() > deadline:
                self.stop()
                return counts
            time.sleep(poll_s)

    def close(self) -> None:
        if self.measuring is not None:
            self.measuring.close()
