"""Train a population of networks together on one device, each candidate seen from its own thread.

A search runs each trial in a thread of its own; a trainer hands its candidate to `Population.run` as
a `Member` and gets control back once the member has taken all its steps, or with the exception that
its step or its host work raised (a pruner's stop, a cut at a rung, a divergence).

The work is split by who may wait:

- **A driver thread** (one per population, running while anyone trains) only queues steps: each round,
  every member that is ready takes one `step()`, which must not wait for the device (or, with
  `round_size`, that many of them, those furthest along first: once the device is saturated, more
  members a round only slow every member down, and the ones nearest a result get there first). It keeps at most
  `lead_rounds` rounds queued ahead of the device, so that a decision about a member (its rung, its
  epoch's validation) comes soon after its step ran.
- **Each member's own thread** does everything that may wait: `prepare()` (moving the network to the
  device, capturing its step) before it takes a place, and the host work that a step may ask for
  (`step()` returns it: validation, a report that may raise) while the others keep training. A member
  waiting on its host work is paused: it holds its place but takes no steps.

Places are handed out first come, first served. `ahead` members more than `size` may hold a
reservation and prepare while the places are full, so a freed place is taken at once by a member
that is ready. A member joins as soon as it is prepared and a place is free, without waiting for
members reserved before it that are still preparing (joining in reservation order, a population of 16
on an H100 trained 4-5 members for 1.3 s at its start while up to 9 prepared members waited for one
still preparing; its training replayed without the search around it took as long either way, BENCHMARKS.md,
"Joining in the order of reservations"); where several prepared members wait for a place, the earliest
reserved takes it. A memory budget counts every reserved member (preparing, waiting or training).

Host work (preparing a member, the work its steps hand back) takes a **host turn**: at most
`host_turns` members do it at once. The driver needs the interpreter for a moment each round, and a
thread waiting for the interpreter's lock gets it in turn with every other thread that wants it: with
dozens of members building, warming up and validating at once, the driver's launches came so late that
the device ran dry. A member waiting for its turn waits on a lock, not for the interpreter, so the
driver competes with `host_turns` threads at most. A paused member's host work goes before preparing
new ones (it holds a place that takes no steps meanwhile; a new member holds only a reservation), and
host work that waits for the device (a validation read back) gives its turn up while it waits
(`waiting_for_device`). On an H200 with 16 places, host work waited 0.6-1.1 s for a turn on average
while a turn was held through its validation's wait for the device; a paused member's waited 0.24 s
after this change (BENCHMARKS.md, "Earlier rungs end to end").

A change wakes only the thread it concerns: a member's own thread when the driver pauses or ends it, the
driver when a member may step again, one waiting thread when a host turn is free. Woken all at once at
each change, every waiting thread took the interpreter only to wait again: 23 wake-ups a pause in a
population of 24 (`tests/test_colocate_population.py`), a number that grows with the population.

`stop(error)` (a Ctrl-C) ends every member with `error` after its step or host work in flight, and
admits nobody after.

`activity()` tells how the population trained: members a round on average and at most, where the
others were meanwhile (paused for host work, or reserved and not yet joined), how long host work waited
for its turn (all of it, and a paused member's alone), and the share of the driver's time spent waiting
for the device (low: the host, not the device, set the pace).

`quiet()` holds every launch back (the driver's rounds and any work wrapped in `launching()`) until
the block ends, so that a measurement sees an idle device. Members never share state: each has its
own network, optimizer, schedule and data order, so training one in a population computes exactly
what training it alone computes (`tests/test_colocate_training.py` checks this bit for bit).
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nasutil.errors import NasutilError

Step = Callable[[], "Callable[[], None] | None"]

READY, PAUSED, DONE = "ready", "paused", "done"

#: the most steps one member takes in a round while the members finish together (`Population._in_proportion`)
MOST_STEPS_A_ROUND = 4


@dataclass(eq=False)
class Member:
    """One candidate. `step()` queues its next training step and returns the host work that must follow
    it before the next step (or None); `steps` is how many it takes in all; `prepare()`, if given, runs
    in the member's own thread once it holds a reservation, before it takes a place."""

    step: Step
    steps: int
    memory_bytes: float = 0.0  # its estimated device memory, counted against the population's budget
    prepare: Callable[[], None] | None = None
    stream: Any = None  # the CUDA stream its steps run on, if any
    taken: int = 0
    woken: Any = field(default=None, repr=False)  # its thread's condition (on the population's lock), once it trains
    error: BaseException | None = field(default=None, repr=False)
    state: str = READY
    pending: Callable[[], None] | None = field(default=None, repr=False)
    joined_at: float | None = None  # time.perf_counter() when it took its place, and when it left it
    left_at: float | None = None

    @property
    def done(self) -> bool:
        return self.state == DONE


class Gate:
    """Many threads may launch work at once; `closed()` waits until none does and holds new ones back."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._active = 0
        self._closed = 0

    @contextlib.contextmanager
    def launching(self) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: not self._closed)
            self._active += 1
        try:
            yield
        finally:
            with self._changed:
                self._active -= 1
                if self._closed and not self._active:  # wake only a closer, and only when it may go on
                    self._changed.notify_all()

    @contextlib.contextmanager
    def closed(self) -> Iterator[None]:
        with self._changed:
            self._closed += 1
            self._changed.wait_for(lambda: self._active == 0)
        try:
            yield
        finally:
            with self._changed:
                self._closed -= 1
                self._changed.notify_all()


@dataclass(eq=False)
class Place:
    """A reservation: its turn in the queue, the memory it counts, and the stream lent to its member."""

    ticket: int
    memory_bytes: float
    stream: Any = None
    prepared: bool = False  # its member waits to join, or has joined
    joined: bool = False


class Population:
    """At most `size` members train at once, and all reserved ones together within `memory_budget_bytes`
    where one is set (a member alone may use it all); `ahead` more may prepare while the places are full.

    `device`: where the members train; on CUDA each reservation lends one of the population's streams
    (`Place.stream`), so that the caching allocator's blocks of a stream serve the members that follow.
    `switch_interval_s`: Python's thread switch interval while the driver runs, so that threads
    preparing members hold the interpreter for short turns and the driver's launches are not held up.
    `host_turns`: how many members may do host work at once (see the module).
    `round_size`: at most this many members step in one round, those that have taken the most steps
    first (ties: the first to join); None: every member that is ready.
    `finish_together`: once `closing()` was called and nobody waits for a place, members take steps a round
    in proportion to the steps they have left (`_in_proportion`); False: one step a round each to the end."""

    def __init__(self, size: int, memory_budget_bytes: float | None = None, ahead: int = 0, device: Any = None,
                 lead_rounds: int = 2, switch_interval_s: float | None = 5e-4, host_turns: int = 4,
                 round_size: int | None = None, finish_together: bool = False) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise NasutilError(f"a population needs at least one member, got {size}")
        if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0:
            raise NasutilError(f"a population's ahead must be a whole number >= 0, got {ahead}")
        if isinstance(host_turns, bool) or not isinstance(host_turns, int) or host_turns < 1:
            raise NasutilError(f"a population's host_turns must be a whole number >= 1, got {host_turns}")
        if round_size is not None and (isinstance(round_size, bool) or not isinstance(round_size, int)
                                       or round_size < 1):
            raise NasutilError(f"a population's round_size must be a whole number >= 1 or None, got {round_size}")
        self.round_size, self.finish_together = round_size, bool(finish_together)
        self._closing = False  # set by closing(): no member is to come after those reserved or asked for
        self.finishing_rounds = 0  # rounds stepped in proportion to the steps left (`_in_proportion`)
        self._finishing_from: float | None = None  # when the first such round ran
        self.size, self.ahead, self.memory_budget_bytes = size, ahead, memory_budget_bytes
        self.device, self.lead_rounds, self.switch_interval_s = device, max(1, int(lead_rounds)), switch_interval_s
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)  # reservations and joins wait on it: room may be free
        self._ready = threading.Condition(self._lock)  # the driver waits on it: a member may step, or none trains
        self._tickets = itertools.count()
        self._queue: deque[Place] = deque()  # reservations not yet granted, in order
        self._reserved: list[Place] = []  # granted, in order: preparing, waiting to join, or training
        self._members: list[Member] = []  # training
        self._streams: list[Any] = []  # streams free to lend
        self._driver: threading.Thread | None = None
        self.gate = Gate()
        self.host_turns = host_turns
        self._turn_lock = threading.Lock()
        self._urgent_turns = threading.Condition(self._turn_lock)  # a paused member's host work waits here
        self._plain_turns = threading.Condition(self._turn_lock)  # preparing a new member waits here
        self._urgent_waiting = 0  # paused members' host work waiting for a turn: it goes first
        self._holding = threading.local()  # whether this thread holds a turn (`waiting_for_device`)
        self._in_turn = 0  # members doing host work now: a turn is free while fewer than host_turns do
        self.most_in_turn = 0  # the most members that did host work at once
        self._stopped: BaseException | None = None  # set by stop(): what every member raises
        self.rounds = 0  # rounds driven
        self.member_steps = 0  # steps taken by all members: over `rounds`, how many trained at once
        self.most_together = 0  # the most members that took one round together
        self.most_reserved = 0
        self.memory_shortfalls = 0  # members that ran out of device memory while preparing (`out_of_memory`)
        self.reservations_that_fit: int | None = None  # set where members carry no estimates
        self.paused_rounds = 0  # members paused for host work, summed over rounds: over `rounds`, how many a round
        self.unjoined_rounds = 0  # reserved members not yet training (preparing, or waiting for a place), likewise
        self.turn_waits = 0  # host work that took a turn
        self.turn_wait_s = 0.0  # its time waiting for that turn
        self.paused_waits = 0  # of that, a paused member's host work (and turns taken back after the device)
        self.paused_wait_s = 0.0
        self.driving_s = 0.0  # the driver's time with someone training
        self.waiting_s = 0.0  # of that, the time it waited for the device to catch up (the device was busy)
        self.quiets = 0  # times the population was held quiet (a measurement on its device)
        self.quiet_s = 0.0  # the time it was held so, the wait for its queued work included
        self.quiet_gate_s = 0.0  # of that, the wait for host work already launching to leave the gate
        self.quiet_drain_s = 0.0  # and the wait for the device to run what was queued before the hold
        self._first_reserved: float | None = None  # when the first reservation was granted
        self._membership: list[tuple[float, int]] = []  # (time, members joined) after every join and leave
        self._epoch_offset = time.time() - time.perf_counter()  # perf_counter to the epoch (a study's clock)

    # -- a member's thread -----------------------------------------------------------------------

    def run(self, member: Member) -> None:
        """Reserve, prepare, train `member` to its end among the others; raises what it raised."""
        with self.place(member.memory_bytes) as place:
            if member.prepare is not None:
                with self.host_turn(), self.gate.launching():
                    member.prepare()
            self.train(place, member)

    @contextlib.contextmanager
    def host_turn(self, paused: bool = False) -> Iterator[None]:
        """A turn to do host work for a member (build, warm up, capture, validate): blocks until one of
        the `host_turns` is free. `paused`: the work of a member that holds a place and takes no steps
        until it is done, which goes before work that is not (preparing a new member)."""
        self._take_turn(paused)
        try:
            yield
        finally:
            self._give_turn()

    @contextlib.contextmanager
    def waiting_for_device(self) -> Iterator[None]:
        """Inside host work, a block that only waits for the device: the turn is free to another member
        meanwhile, and taken back (first in line) when the block ends."""
        if not getattr(self._holding, "turn", False):
            yield
            return
        self._give_turn()
        try:
            yield
        finally:
            self._take_turn(paused=True)

    def _take_turn(self, paused: bool) -> None:
        asked = time.perf_counter()
        waits_on = self._urgent_turns if paused else self._plain_turns
        with self._turn_lock:
            if paused:
                self._urgent_waiting += 1
            try:
                while not (self._in_turn < self.host_turns and (paused or self._urgent_waiting == 0)):
                    waits_on.wait()
            finally:
                if paused:
                    self._urgent_waiting -= 1
            waited = time.perf_counter() - asked
            self.turn_waits += 1
            self.turn_wait_s += waited
            if paused:
                self.paused_waits += 1
                self.paused_wait_s += waited
            self._in_turn += 1
            self.most_in_turn = max(self.most_in_turn, self._in_turn)
            self._pass_turn_on()
        self._holding.turn = True

    def _give_turn(self) -> None:
        self._holding.turn = False
        with self._turn_lock:
            self._in_turn -= 1
            self._pass_turn_on()

    def _pass_turn_on(self) -> None:
        """Wake one waiting thread if a turn is free: a paused member's first. Waking every waiter for each
        turn given up had dozens of threads of a large population take the interpreter to find the turn
        gone; one woken thread that takes a turn passes a turn still free on in its turn."""
        if self._in_turn < self.host_turns:
            (self._urgent_turns if self._urgent_waiting else self._plain_turns).notify()

    @contextlib.contextmanager
    def place(self, memory_bytes: float = 0.0) -> Iterator[Place]:
        """A reservation, granted in the order asked once the population has room for it (blocks until
        then); released, with its stream, when the block ends."""
        place = Place(next(self._tickets), float(memory_bytes))
        with self._lock:
            self._queue.append(place)
            try:
                self._changed.wait_for(lambda: self._stopped is not None
                                       or (self._queue[0] is place and self._room_for(place)))
                if self._stopped is not None:
                    raise self._stopped
            except BaseException:
                self._queue.remove(place)
                self._changed.notify_all()
                raise
            self._queue.popleft()
            self._reserved.append(place)
            if self._first_reserved is None:
                self._first_reserved = time.perf_counter()
            self.most_reserved = max(self.most_reserved, len(self._reserved))
            place.stream = self._lend_stream()
            self._changed.notify_all()
        try:
            yield place
        finally:
            if place.stream is not None:
                place.stream.synchronize()  # nothing of this member's is left on it when the next one has it
            with self._lock:
                self._reserved.remove(place)
                if place.stream is not None:
                    self._streams.append(place.stream)
                self._changed.notify_all()

    def train(self, place: Place, member: Member) -> None:
        """Train a prepared member in its reserved place: it joins once a place is free and no prepared member
        reserved before it still waits for one, and leaves when done; raises what it raised."""
        with self._lock:
            place.prepared = True
            self._changed.wait_for(lambda: self._stopped is not None or self._may_join(place))
            if self._stopped is not None:
                raise self._stopped
            place.joined = True
            member.state = READY if member.taken < member.steps else DONE
            member.woken = threading.Condition(self._lock)
            self._members.append(member)
            member.joined_at = time.perf_counter()
            self._membership.append((member.joined_at, len(self._members)))
            self._start_driver()
            self._changed.notify_all()  # a later reservation may join now
            self._ready.notify()
        try:
            while True:
                with self._lock:  # woken by the driver only when this member's state changed
                    member.woken.wait_for(lambda: member.state != READY)
                    if member.state == DONE:
                        break
                    work, member.pending = member.pending, None
                try:  # the member's host work, outside the lock, while the others train
                    if work is not None:
                        with self.host_turn(paused=True):
                            work()
                except BaseException as exc:
                    member.error = exc
                with self._lock:
                    member.state = DONE if member.error is not None or member.taken >= member.steps else READY
                    self._ready.notify()
        finally:
            with self._lock:  # only the member's own thread removes it: nobody else does
                self._members.remove(member)
                member.left_at = time.perf_counter()
                self._membership.append((member.left_at, len(self._members)))
                member.state = DONE
                self._changed.notify_all()  # a place is free
                self._ready.notify()  # the driver ends if none trains
        if member.error is not None:
            raise member.error

    def stop(self, error: BaseException) -> None:
        """Stop now (a Ctrl-C): every member's thread raises `error` once its step or host work in flight
        has ended, and nobody joins any more. Only the driver ends a member that is stepping, so a
        member's thread never releases what a step in flight still uses."""
        with self._lock:
            self._stopped = error
            for m in self._members:
                if m.error is None:
                    m.error = error
            self._changed.notify_all()
            self._ready.notify()

    def closing(self) -> None:
        """No member is to come after those that hold or asked for a reservation now (the search has asked its
        last trial). A member that comes anyway trains as any other; with `finish_together` this changes how
        many steps each member takes a round, and nothing otherwise."""
        with self._lock:
            self._closing = True

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """No launches from this population (rounds, preparing, host work in `launching()`) inside the
        block, and whatever was queued has run on the device when it begins. Its time is counted (`quiet_s`):
        what measuring on the device the population trains on costs the population."""
        started = time.perf_counter()
        try:
            with self.gate.closed():
                closed = time.perf_counter()
                self.quiet_gate_s += closed - started
                if self.device is not None and getattr(self.device, "type", str(self.device)) == "cuda":
                    import torch

                    torch.cuda.synchronize(self.device)
                self.quiet_drain_s += time.perf_counter() - closed
                yield
        finally:
            self.quiets += 1
            self.quiet_s += time.perf_counter() - started

    def idle(self) -> bool:
        """Nobody trains, prepares or waits for a place: holding the population quiet now stops nothing.
        (Mid-search a reservation is nearly always held or asked for; at the end of a search none is.)"""
        with self._lock:
            return not self._members and not self._reserved and not self._queue

    # -- admission -------------------------------------------------------------------------------

    def _room_for(self, place: Place) -> bool:
        if len(self._reserved) >= min(self.size + self.ahead, self.reservations_that_fit or self.size + self.ahead):
            return False
        if self.memory_budget_bytes is None or not self._reserved:
            return True
        return sum(p.memory_bytes for p in self._reserved) + place.memory_bytes <= self.memory_budget_bytes

    def out_of_memory(self, place: Place) -> bool:
        """The member preparing in `place` ran out of device memory: what the other reservations hold is what
        fits, so the memory budget becomes their estimates' sum (where members carry estimates; else their
        number caps the reservations), and no new member is let in until enough leave. Returns whether the
        member may try again in a new place; not where it was alone, since nothing will leave.

        A member's estimate (`colocate.packing.estimated_memory_bytes`) leaves out what its CUDA graph's pool and
        the allocator's cache hold beyond its tensors: at batch 256 on an 80 GB H100 a population of 14 held
        78 GiB where its estimates summed to a fraction of the budget (BENCHMARKS.md, "Settled readings")."""
        with self._lock:
            others = [p for p in self._reserved if p is not place]
            if not others:
                return False
            held = sum(p.memory_bytes for p in others)
            if held > 0:
                self.memory_budget_bytes = min(held, self.memory_budget_bytes or held)
            else:
                self.reservations_that_fit = len(others)
            self.memory_shortfalls += 1
            self._changed.notify_all()
            return True

    def _may_join(self, place: Place) -> bool:
        if len(self._members) >= self.size:
            return False
        return all(p.joined or not p.prepared for p in self._reserved if p.ticket < place.ticket)

    def _lend_stream(self) -> Any:
        if self.device is None or getattr(self.device, "type", str(self.device)) != "cuda":
            return None
        if self._streams:
            return self._streams.pop()
        import torch

        return torch.cuda.Stream(device=self.device)

    # -- the driver ------------------------------------------------------------------------------

    def _start_driver(self) -> None:
        if self._driver is None:
            self._driver = threading.Thread(target=self._drive, name="population-driver", daemon=True)
            self._driver.start()

    def _drive(self) -> None:
        """Rounds while anyone trains: each ready member takes one step; a member whose step asks for host
        work pauses until its own thread has done it; one that fails or has taken all its steps is done."""
        before = sys.getswitchinterval()
        if self.switch_interval_s:
            sys.setswitchinterval(min(before, self.switch_interval_s))
        marks: deque[Any] = deque()  # one event per round queued, to keep the lead bounded
        last = time.perf_counter()
        try:
            while True:
                with self._lock:
                    self._ready.wait_for(lambda: not self._members or any(m.state == READY for m in self._members))
                    if not self._members:
                        self._driver = None
                        return
                    together = self._this_round([m for m in self._members if m.state == READY])
                    self.paused_rounds += sum(m.state == PAUSED for m in self._members)
                    self.unjoined_rounds += sum(not p.joined for p in self._reserved)
                stepping = len({id(m) for m in together}) if self.finish_together else len(together)
                self.most_together = max(self.most_together, stepping)
                changed: list[Member] = []  # members paused or done this round: their threads are woken
                waited = time.perf_counter()
                while len(marks) >= self.lead_rounds:  # outside the gate: a capture need not wait for this
                    marks.popleft().synchronize()  # the device is lead_rounds behind: let it catch up
                self.waiting_s += time.perf_counter() - waited
                with self.gate.launching():
                    for m in together:  # a member listed k times takes k steps, unless paused or done before
                        if m.state != READY:
                            continue
                        if m.error is not None:  # stopped from outside (stop()): it takes no more steps
                            m.pending, m.state = None, DONE
                            changed.append(m)
                            continue
                        try:
                            work = m.step()
                            m.taken += 1
                            self.member_steps += 1
                        except BaseException as exc:  # the member's own thread re-raises it
                            m.error, work = exc, None
                        if m.error is not None or work is not None or m.taken >= m.steps:
                            m.pending = work
                            m.state = PAUSED if m.error is None and work is not None else DONE
                            changed.append(m)
                    with self._lock:  # a member that has left gave its stream back: never mark that one
                        marks.append(self._mark([m for m in together if m.state != DONE]))
                self.rounds += 1
                now = time.perf_counter()
                self.driving_s, last = self.driving_s + now - last, now
                if changed:
                    with self._lock:
                        for m in changed:
                            m.woken.notify()
        finally:
            if self.switch_interval_s and sys.getswitchinterval() == min(before, self.switch_interval_s):
                sys.setswitchinterval(before)

    def _this_round(self, ready: list[Member]) -> list[Member]:
        """The steps of this round (called under the lock): one for every member that is ready, or for the
        `round_size` furthest along (the members list is in joining order, and the sort keeps it among equals).
        While the members finish together (`_finishing`), a member listed k times takes k steps in a row."""
        if self.round_size is not None and len(ready) > self.round_size:
            ready = sorted(ready, key=lambda m: -m.taken)[:self.round_size]
        if self.finish_together and self._finishing():
            return self._in_proportion(ready)
        return ready

    def _finishing(self) -> bool:
        """No member is to come (`closing()`), and nobody waits for a place or prepares for one."""
        return self._closing and not self._queue and all(p.joined for p in self._reserved)

    def _in_proportion(self, ready: list[Member]) -> list[Member]:
        """Each ready member's steps this round: its steps left over the median of the ready members' (the
        lower one), rounded, from 1 to `MOST_STEPS_A_ROUND`. One step a round each, the members that joined
        last trained on with few others at the end of a search; with more steps a round they finish nearer
        the others, and every member still steps every round, so the device has as much to run at once."""
        lefts = sorted(m.steps - m.taken for m in ready)
        median = max(1, lefts[(len(lefts) - 1) // 2]) if lefts else 1
        steps = []
        for m in ready:
            steps += [m] * min(MOST_STEPS_A_ROUND, max(1, round((m.steps - m.taken) / median)))
        if self._finishing_from is None:
            self._finishing_from = time.perf_counter()
        self.finishing_rounds += 1
        return steps

    def activity(self) -> dict[str, Any]:
        """How the population trained so far: rounds, members a round on average and at most, members paused
        for host work and reserved ones not yet joined on average over the rounds, the mean wait of host work
        for its turn (all, and a paused member's alone), the share of the driver's time spent waiting for
        the device (near 1: the device, not the host, sets the pace), how often and how long it was held
        quiet for measurements (of that, the waits for host work to leave the gate and for queued work to run),
        the rounds stepped in proportion to the steps left and when the first ran (`finish_together`), its
        places, and members joined over time (`_width`, `membership`)."""
        rounds = self.rounds or 1
        return {"rounds": self.rounds, "mean_together": self.member_steps / self.rounds if self.rounds else 0.0,
                "mean_paused": self.paused_rounds / rounds, "mean_unjoined": self.unjoined_rounds / rounds,
                "mean_turn_wait_ms": 1e3 * self.turn_wait_s / self.turn_waits if self.turn_waits else 0.0,
                "mean_paused_wait_ms": 1e3 * self.paused_wait_s / self.paused_waits if self.paused_waits else 0.0,
                "most_together": self.most_together, "most_reserved": self.most_reserved,
                "memory_shortfalls": self.memory_shortfalls, "driving_s": round(self.driving_s, 3),
                "quiets": self.quiets, "quiet_s": round(self.quiet_s, 3), "quiet_gate_s": round(self.quiet_gate_s, 3),
                "quiet_drain_s": round(self.quiet_drain_s, 3), "finishing_rounds": self.finishing_rounds,
                "finishing_from_s": self._since_origin(self._finishing_from),
                "device_bound": self.waiting_s / self.driving_s if self.driving_s else 0.0, "places": self.size,
                **self._width(), "membership_timeline": self.membership()}

    def origin(self) -> float | None:
        """The time.perf_counter() reading `membership` counts from: the first reservation (else the first join;
        None before either)."""
        with self._lock:
            if self._first_reserved is not None:
                return self._first_reserved
            return self._membership[0][0] if self._membership else None

    def _since_origin(self, moment: float | None) -> float | None:
        origin = self.origin()
        return None if moment is None or origin is None else round(moment - origin, 4)

    def membership(self) -> list[tuple[float, int]]:
        """Members training after every join and leave, in seconds since the first reservation: the population's
        width over time, which the run folder's `population.png` draws."""
        origin = self.origin()
        with self._lock:
            timeline = list(self._membership)
        return [(round(t - origin, 4), n) for t, n in timeline] if origin is not None else []

    def _width(self) -> dict[str, Any]:
        """Members joined over time, from the first join to the last leave: their mean weighted by time (where the
        mean over rounds counts a short round as much as a long one), the seconds from the first reservation to
        the first join (the first member's preparation), that span, and the mean in each tenth of it (the fill
        at the start, the tail at the end); the first join and last leave in seconds since the epoch, to place the
        span among a study's trial times."""
        with self._lock:
            timeline, first = list(self._membership), self._first_reserved
        if len(timeline) < 2 or timeline[-1][0] <= timeline[0][0]:
            return {}
        start, end = timeline[0][0], timeline[-1][0]
        tenths = [0.0] * 10
        step = (end - start) / 10
        for (t0, members), (t1, _) in zip(timeline, timeline[1:]):
            for k in range(10):  # the part of [t0, t1) in each tenth
                low, high = start + k * step, start + (k + 1) * step
                overlap = min(t1, high) - max(t0, low)
                if overlap > 0:
                    tenths[k] += members * overlap / step
        return {"members_time_mean": sum(tenths) / 10, "first_join_after_s": start - (first or start),
                "membership_span_s": end - start, "members_by_tenth": [round(v, 2) for v in tenths],
                "first_join_at": start + self._epoch_offset, "last_leave_at": end + self._epoch_offset}

    @staticmethod
    def _mark(together: list[Member]) -> Any:
        """An event after the round's last step on the device: the streams run side by side, so one of
        them tells how far the device has come."""
        stream = next((m.stream for m in reversed(together) if m.stream is not None), None)
        if stream is None:
            return _Done()
        import torch

        event = torch.cuda.Event()
        event.record(stream)
        return event


class _Done:
    def synchronize(self) -> None:
        return None
