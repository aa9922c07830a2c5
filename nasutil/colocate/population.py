"""Train a population of networks together on one device, each seen from its own thread.

A search runs each trial in a thread of its own (Optuna's `n_jobs`); a trainer hands its candidate to
`Population.run` as a `Member` (one training step at a time) and gets control back once the member
has taken all its steps, or with the exception a step raised (a pruner's stop, a divergence). Whatever
thread is waiting drives: each round, every member present takes one step, so a member that leaves
(finished or stopped) frees its place for the next trial at once. Members never share state: each has
its own network, optimizer, schedule and data order, so training one in a population computes exactly
what training it alone computes (`tests/test_colocate_training.py` checks this bit for bit on a CPU).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from nasutil.errors import NasutilError


@dataclass(eq=False)
class Member:
    """One candidate: `step()` runs its next training step (and whatever ends an epoch: validation, a
    report that may raise); `steps` is how many it takes in all."""

    step: Callable[[], None]
    steps: int
    memory_bytes: float = 0.0  # its estimated device memory, counted against the population's budget
    taken: int = 0
    error: BaseException | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self.error is not None or self.taken >= self.steps


class Population:
    """At most `size` members train at once, and together within `memory_budget_bytes` where one is set
    (a member alone may use it all); `run` blocks a further one until a place and the memory free up."""

    def __init__(self, size: int, memory_budget_bytes: float | None = None) -> None:
        if size < 1:
            raise NasutilError(f"a population needs at least one member, got {size}")
        self.size = size
        self.memory_budget_bytes = memory_budget_bytes
        self._members: list[Member] = []
        self._changed = threading.Condition()
        self._driving = False
        self.rounds = 0  # rounds driven
        self.most_together = 0  # the most members that took one round together

    def run(self, member: Member) -> None:
        """Train `member` to its end among the others; raises what its step raised."""
        with self._changed:
            self._changed.wait_for(lambda: self._fits(member))
            self._members.append(member)
            self._changed.notify_all()
        try:
            while True:
                with self._changed:
                    self._changed.wait_for(lambda: member.done or not self._driving)
                    if member.done:
                        break
                    self._driving = True
                try:
                    self._drive(until=member)
                finally:
                    with self._changed:
                        self._driving = False
                        self._changed.notify_all()
        finally:
            with self._changed:
                if member in self._members:
                    self._members.remove(member)
                self._changed.notify_all()
        if member.error is not None:
            raise member.error

    def _fits(self, member: Member) -> bool:
        if len(self._members) >= self.size:
            return False
        if self.memory_budget_bytes is None or not self._members:
            return True
        return sum(m.memory_bytes for m in self._members) + member.memory_bytes <= self.memory_budget_bytes

    def _drive(self, until: Member) -> None:
        """Run rounds until this thread's own member is done (another waiting thread then drives on)."""
        while not until.done:
            with self._changed:
                together = [m for m in self._members if not m.done]
            self.most_together = max(self.most_together, len(together))
            for m in together:
                try:
                    m.step()
                    m.taken += 1
                except BaseException as exc:  # the member's own thread re-raises it
                    m.error = exc
            self.rounds += 1
            with self._changed:
                finished = [m for m in together if m.done]
                for m in finished:
                    self._members.remove(m)
                if finished:
                    self._changed.notify_all()
