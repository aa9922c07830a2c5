"""The population's own behaviour, with plain Python members (no torch): members leave exactly once,
a freed place is taken while the others train, host work of one member does not hold the others back,
a prepared member takes a free place before an earlier one still preparing, host work takes turns, and `quiet()` holds every
launch back."""

from __future__ import annotations

import threading
import time

import pytest

from nasutil.colocate import Member, Population
from nasutil.errors import NasutilError


def _start(population: Population, member: Member, errors: dict, name: str) -> threading.Thread:
    def run() -> None:
        try:
            population.run(member)
        except BaseException as exc:  # recorded for the test to look at
            errors[name] = exc

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


def _wait_until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _joined(population: Population, member: Member) -> bool:
    with population._changed:
        return member in population._members


def test_a_member_that_finishes_while_another_joins_leaves_once():
    """A member finishing in a round while a new member joins used to be removed twice (by its own
    thread, woken by the join, and at the round's end), failing the member whose thread drove."""
    population = Population(4)
    errors: dict[str, BaseException] = {}
    threads: list[threading.Thread] = []
    short = Member(lambda: None, 1)
    late = Member(lambda: None, 1)

    def long_step() -> None:  # its first step waits until the others have joined
        if long.taken == 0:
            _wait_until(lambda: len(population._members) == 3, timeout=5.0)
        time.sleep(0.002)

    def joining_step() -> None:  # in the round where `short` finishes: a new member joins
        if not any(t.name == "late" for t in threads):
            threads.append(_start(population, late, errors, "late"))
            _wait_until(lambda: not _joined(population, short), timeout=2.0)

    long = Member(long_step, 20)
    joiner = Member(joining_step, 3)
    threads.append(_start(population, long, errors, "long"))
    assert _wait_until(lambda: _joined(population, long))
    threads.append(_start(population, short, errors, "short"))
    assert _wait_until(lambda: _joined(population, short))
    threads.append(_start(population, joiner, errors, "joiner"))
    deadline = time.monotonic() + 30
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        for thread in list(threads):
            thread.join(timeout=0.1)
    assert errors == {}
    assert (long.taken, short.taken, joiner.taken, late.taken) == (20, 1, 3, 1)
    assert population._members == []


def test_a_freed_place_is_taken_while_the_others_train():
    population = Population(2)
    errors: dict[str, BaseException] = {}
    log: list[tuple[str, int]] = []

    def stepper(name: str):
        def step() -> None:
            log.append((name, len(log)))
            time.sleep(0.002)
        return step

    long, short, next_ = Member(stepper("long"), 40), Member(stepper("short"), 3), Member(stepper("next"), 3)
    threads = [_start(population, long, errors, "long")]
    assert _wait_until(lambda: _joined(population, long))
    threads += [_start(population, short, errors, "short"), _start(population, next_, errors, "next")]
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {}
    first_next = min(i for name, i in log if name == "next")
    last_long = max(i for name, i in log if name == "long")
    assert first_next < last_long  # the third member trained beside the long one, not after it
    assert population.most_together == 2


def test_one_members_host_work_does_not_hold_the_others_back():
    """A member whose step asks for slow host work (a validation, a report) pauses; the others step on."""
    population = Population(2)
    errors: dict[str, BaseException] = {}
    others_during: list[int] = []
    steady = Member(lambda: time.sleep(0.001), 400)

    def slow_work() -> None:
        before = steady.taken
        time.sleep(0.2)
        others_during.append(steady.taken - before)

    pausing = Member(lambda: slow_work, 2)
    threads = [_start(population, steady, errors, "steady")]
    assert _wait_until(lambda: _joined(population, steady))
    threads.append(_start(population, pausing, errors, "pausing"))
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {} and pausing.taken == 2 and steady.taken == 400
    assert len(others_during) == 2 and min(others_during) >= 20, others_during



def test_host_work_takes_turns_while_the_driver_steps_on():
    """At most `host_turns` members prepare or do their steps' host work at once (each one competing for
    the interpreter delays the driver's launches); the driver needs no turn, so a member without host
    work steps on while the others wait for theirs."""
    population = Population(8, host_turns=2)
    errors: dict[str, BaseException] = {}
    busy, most = [0], [0]
    lock = threading.Lock()

    def host_work() -> None:
        with lock:
            busy[0] += 1
            most[0] = max(most[0], busy[0])
        time.sleep(0.02)
        with lock:
            busy[0] -= 1

    steady = Member(lambda: time.sleep(0.001), 100_000)
    threads = [_start(population, steady, errors, "steady")]
    assert _wait_until(lambda: _joined(population, steady))
    members = [Member(lambda: host_work, 3, prepare=host_work) for _ in range(6)]
    threads += [_start(population, m, errors, f"m{i}") for i, m in enumerate(members)]
    before = steady.taken
    for thread in threads[1:]:
        thread.join(timeout=30)
    stepped = steady.taken - before
    steady.steps = steady.taken + 1  # end it
    threads[0].join(timeout=30)
    assert errors == {} and all(m.taken == 3 for m in members)
    assert most[0] == 2 and population.most_in_turn == 2  # 6 members, 24 pieces of host work, 2 at a time
    assert stepped >= 50, stepped  # 24 x 20 ms of host work two at a time: the steady one took its steps




def test_a_paused_members_host_work_takes_the_next_turn_before_preparing_ones():
    """Three threads want the one turn that a fourth holds: two prepare new members, and one does the host
    work of a member that holds a place and steps no more until it is done. That one goes first, though it
    asked last."""
    population = Population(4, host_turns=1)
    order: list[str] = []
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with population.host_turn():
            held.set()
            release.wait(10)

    def wants(name: str, paused: bool) -> None:
        with population.host_turn(paused=paused):
            order.append(name)

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    assert held.wait(10)
    for name, paused in (("prepare a", False), ("prepare b", False), ("paused", True)):
        threads.append(threading.Thread(target=wants, args=(name, paused)))
        threads[-1].start()
        assert _wait_until(lambda: _waiters(population) == len(threads) - 1)
    release.set()
    for thread in threads:
        thread.join(timeout=10)
    assert order[0] == "paused" and sorted(order[1:]) == ["prepare a", "prepare b"]
    assert population.paused_waits == 1 and population.activity()["mean_paused_wait_ms"] > 0


def test_host_work_waiting_for_the_device_lends_its_turn_out():
    """With one turn, host work that waits for the device (`waiting_for_device`) lets another member's host
    work run meanwhile, and carries on once it has the turn back."""
    population = Population(4, host_turns=1)
    steps: list[str] = []
    device_done = threading.Event()

    def validating() -> None:
        with population.host_turn(paused=True):
            steps.append("queued its validation")
            with population.waiting_for_device():
                device_done.wait(10)
            steps.append("read its validation")

    def preparing() -> None:
        with population.host_turn():
            steps.append("prepared")
        device_done.set()

    first = threading.Thread(target=validating)
    first.start()
    assert _wait_until(lambda: steps == ["queued its validation"])
    second = threading.Thread(target=preparing)
    second.start()
    first.join(timeout=10)
    second.join(timeout=10)
    assert steps == ["queued its validation", "prepared", "read its validation"]
    assert population.most_in_turn == 1  # never two at once
    with population.waiting_for_device():  # outside a turn it only runs its block
        pass


def _waiters(population: Population) -> int:
    """Threads blocked on the population's turns (the conditions' waiters)."""
    return len(population._urgent_turns._waiters) + len(population._plain_turns._waiters)


class _CountingCondition(threading.Condition):
    """A condition that counts how often a thread waiting on it woke up, for every condition at once."""

    wakes = 0
    _count_lock = threading.Lock()

    def wait(self, timeout=None):
        result = super().wait(timeout)
        with _CountingCondition._count_lock:
            _CountingCondition.wakes += 1
        return result


def test_a_change_wakes_the_threads_it_concerns_not_every_waiting_one(monkeypatch):
    """A member's pause, its host work's end and a host turn given up each wake the one thread they
    concern: 24 members pausing for host work every 10 of 40 steps woke about 2 threads a pause. With
    every waiting thread woken at each change (what the population did), a pause woke 23, each taking the
    interpreter from the driver only to wait again, a number that grows with the population's size."""
    import types

    import nasutil.colocate.population as population_module

    counting = types.SimpleNamespace(**vars(threading))
    counting.Condition = _CountingCondition
    monkeypatch.setattr(population_module, "threading", counting)
    monkeypatch.setattr(_CountingCondition, "wakes", 0)
    population = Population(24, host_turns=2)
    errors: dict[str, BaseException] = {}
    members: list[Member] = []

    def member() -> Member:
        def step():
            time.sleep(0.0002)
            return work if (me.taken + 1) % 10 == 0 else None

        def work() -> None:
            time.sleep(0.001)

        me = Member(step, 40)
        return me

    members += [member() for _ in range(24)]
    threads = [_start(population, m, errors, f"m{i}") for i, m in enumerate(members)]
    for thread in threads:
        thread.join(timeout=60)
    assert errors == {} and all(m.taken == 40 for m in members)
    pauses = 24 * 4
    # about 2 a pause on a quiet machine; on 2 busy cores the threads' order shifts and a pause woke 3.1 (299 in
    # all). Waking every waiting thread would wake 23 a pause: 6 still tells the two apart with room to spare
    assert _CountingCondition.wakes <= 6 * pauses, _CountingCondition.wakes


def test_stop_ends_every_member_and_admits_none():
    """A Ctrl-C: training members raise the error after their step in flight, a member doing host work
    after that work, and reservations still waiting raise it too; the driver then ends."""
    population = Population(2, ahead=1)
    errors: dict[str, BaseException] = {}
    in_work = threading.Event()

    def slow_work() -> None:
        in_work.set()
        time.sleep(0.3)

    steady = Member(lambda: time.sleep(0.001), 1_000_000)
    pausing = Member(lambda: slow_work, 1_000_000)
    waiting = [Member(lambda: None, 5) for _ in range(2)]
    threads = [_start(population, steady, errors, "steady"), _start(population, pausing, errors, "pausing")]
    assert _wait_until(in_work.is_set)
    threads += [_start(population, m, errors, f"waiting{i}") for i, m in enumerate(waiting)]
    assert _wait_until(lambda: len(population._queue) == 1 and len(population._reserved) == 3)
    stop = KeyboardInterrupt("stopped")
    population.stop(stop)
    for thread in threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert set(errors) == {"steady", "pausing", "waiting0", "waiting1"} and all(e is stop for e in errors.values())
    assert pausing.taken == 1 and all(m.taken == 0 for m in waiting)
    assert _wait_until(lambda: population._driver is None, timeout=5)

def test_a_round_of_limited_size_steps_the_members_furthest_along_first():
    """With `round_size`, at most that many members step a round, those that have taken the most steps
    first: of four members of 30 steps, two a round, the first two to join take all their steps before
    the other two take one (not all four together, each finishing at the end)."""
    population = Population(4, round_size=2)
    errors: dict[str, BaseException] = {}
    others_at_finish: dict[int, int] = {}
    gate = threading.Event()
    members: list[Member] = []

    def member(index: int) -> Member:
        def step() -> None:
            gate.wait(timeout=10)  # every member has joined before the first step
            if me.taken + 1 == me.steps:  # its last step: how far the others had come
                others_at_finish[index] = sum(m.taken for m in members if m is not me)

        me = Member(step, 30)
        return me

    members += [member(i) for i in range(4)]
    threads = [_start(population, m, errors, f"m{i}") for i, m in enumerate(members)]
    assert _wait_until(lambda: len(population._members) == 4)
    first, second = (members.index(m) for m in population._members[:2])
    gate.set()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {} and all(m.taken == 30 for m in members)
    assert population.most_together == 2
    assert others_at_finish[first] <= 30 and others_at_finish[second] <= 30  # only the pair had stepped
    assert min(others_at_finish[i] for i in set(range(4)) - {first, second}) >= 60 + 28


def _last_rounds(population: Population, steps: list[int], waits: int = 0) -> tuple[list[int], list[list[int]]]:
    """Members of `steps` steps joined together (their first step waits until all have joined, and for
    `waits` more members beyond the places): the round of each member's last step, and of all its steps."""
    errors: dict[str, BaseException] = {}
    gate = threading.Event()
    rounds: list[list[int]] = [[] for _ in steps]

    def member(index: int, count: int) -> Member:
        def step() -> None:
            gate.wait(timeout=10)
            rounds[index].append(population.rounds)
            time.sleep(0.002)  # a step takes a while: a thread freed to join gets the interpreter meanwhile

        return Member(step, count)

    members = [member(i, n) for i, n in enumerate(steps)]
    threads = []
    for i, m in enumerate(members):  # in order: the first `size` join, the rest wait for a place
        threads.append(_start(population, m, errors, f"m{i}"))
        assert _wait_until(lambda: len(population._members) + len(population._queue) == i + 1)
    assert len(population._members) == population.size and len(population._queue) == waits
    gate.set()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {} and [m.taken for m in members] == steps
    return [r[-1] for r in rounds], rounds


def test_once_closing_members_take_steps_in_proportion_to_the_steps_they_have_left():
    """Three last members of 40, 20 and 10 steps: one step a round each, the longest trained its last 20 steps
    alone after round 20; in proportion to what they have left (over the median, 20), it takes two steps a
    round, and ends with the second, at round 20, while every member still steps every round."""
    together = Population(3, finish_together=True)
    together.closing()
    last, rounds = _last_rounds(together, [40, 20, 10])
    assert last[0] <= 21 and abs(last[0] - last[1]) <= 1
    assert [rounds[0].count(r) for r in range(rounds[0][1], rounds[0][1] + 10)] == [2] * 10  # two a round
    assert all(len(r) == len(set(r)) for r in rounds[1:])  # the others one a round, every round
    assert together.finishing_rounds >= 19 and together.activity()["finishing_from_s"] is not None
    assert together.most_together == 3

    for population in (Population(3), Population(3, finish_together=True)):  # by default; or never told
        if not population.finish_together:
            population.closing()
        last, _ = _last_rounds(population, [40, 20, 10])
        assert last[0] >= 39 and population.finishing_rounds == 0
        assert population.activity()["finishing_from_s"] is None


def test_members_take_one_step_a_round_while_another_waits_for_a_place():
    """Closing changes nothing while a member still waits for a place: the short member takes one step a
    round, as its place is freed as soon as it would have been; steps in proportion come only after."""
    population = Population(2, finish_together=True)
    population.closing()
    _, rounds = _last_rounds(population, [4, 40, 10], waits=1)
    assert rounds[0] == list(range(rounds[0][0], rounds[0][0] + 4))  # one a round until it left
    assert population.finishing_rounds > 0
    assert max(rounds[1].count(r) for r in set(rounds[1])) == 4  # 36 left against 10: four a round


def test_a_member_paused_in_a_round_of_several_steps_takes_no_more_until_its_work_is_done():
    """A member with several steps in a round whose first step asks for host work (a rung) takes the rest
    of them only once its work is done, never while paused."""
    population = Population(2, finish_together=True)
    population.closing()
    errors: dict[str, BaseException] = {}
    during: list[tuple[int, int]] = []

    def validate() -> None:
        before = long.taken
        time.sleep(0.02)
        during.append((before, long.taken))

    def long_step():
        if long.taken == 0:  # its first step waits until both have joined
            _wait_until(lambda: len(population._members) == 2, timeout=5.0)
        long_rounds.append(population.rounds)
        return validate if long.taken == 9 else None  # its tenth step is a rung

    long_rounds: list[int] = []
    long, short = Member(long_step, 80), Member(lambda: time.sleep(0.001), 30)
    threads = [_start(population, m, errors, name) for m, name in ((long, "long"), (short, "short"))]
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {} and long.taken == 80 and short.taken == 30
    assert during == [(10, 10)]
    assert max(long_rounds[:10].count(r) for r in long_rounds[:10]) > 1  # several a round before its rung


@pytest.mark.parametrize("key, value", [("host_turns", 0), ("host_turns", 1.5), ("host_turns", True),
                                        ("round_size", 0), ("round_size", 2.5), ("round_size", True)])
def test_bad_admission_settings_are_user_errors(key, value):
    with pytest.raises(NasutilError, match=key):
        Population(2, **{key: value})

def test_host_work_that_raises_ends_only_its_member():
    population = Population(2)
    errors: dict[str, BaseException] = {}

    def cut() -> None:
        raise ValueError("cut at a rung")

    cut_member = Member(lambda: cut, 10)
    fine = Member(lambda: None, 25)
    threads = [_start(population, cut_member, errors, "cut"), _start(population, fine, errors, "fine")]
    for thread in threads:
        thread.join(timeout=30)
    assert set(errors) == {"cut"} and str(errors["cut"]) == "cut at a rung"
    assert cut_member.taken == 1 and fine.taken == 25


def _recording(joined: list[str], name: str, steps: int = 2, prepare=None) -> Member:
    def step() -> None:
        if not joined or joined[-1] != name:
            joined.append(name)
    return Member(step, steps, prepare=prepare)


def test_a_prepared_member_takes_a_free_place_before_an_earlier_one_still_preparing():
    """A place free while a member reserved earlier is still preparing goes to one that is prepared: at the start
    of a search, joining in reservation order left most places empty while one slow member prepared."""
    population = Population(2, ahead=1)
    errors: dict[str, BaseException] = {}
    joined: list[str] = []
    release_slow = threading.Event()
    slow = _recording(joined, "slow", prepare=lambda: release_slow.wait(10))
    fast = _recording(joined, "fast")
    threads = [_start(population, slow, errors, "slow")]
    assert _wait_until(lambda: len(population._reserved) == 1)
    threads.append(_start(population, fast, errors, "fast"))
    assert _wait_until(lambda: "fast" in joined)  # before the earlier member is prepared
    assert not release_slow.is_set() and slow.taken == 0
    release_slow.set()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {} and joined == ["fast", "slow"] and slow.taken == fast.taken == 2


def test_prepared_members_waiting_for_a_place_take_it_in_the_order_of_their_reservations():
    """With the places full, the earliest reserved of the prepared members joins first, whichever was prepared
    first."""
    population = Population(1, ahead=2)
    errors: dict[str, BaseException] = {}
    joined: list[str] = []
    release_hold, release_first = threading.Event(), threading.Event()
    hold = Member(lambda: (release_hold.wait(10), None)[1], 1)
    first = _recording(joined, "first", prepare=lambda: release_first.wait(10))
    second = _recording(joined, "second")
    threads = [_start(population, hold, errors, "hold")]
    assert _wait_until(lambda: _joined(population, hold))
    threads.append(_start(population, first, errors, "first"))
    assert _wait_until(lambda: len(population._reserved) == 2)
    threads.append(_start(population, second, errors, "second"))
    assert _wait_until(lambda: len(population._reserved) == 3)
    assert _wait_until(lambda: population._reserved[2].prepared)  # second is prepared, first is not
    release_first.set()
    assert _wait_until(lambda: population._reserved[1].prepared)
    release_hold.set()  # the place frees with both prepared
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {} and joined == ["first", "second"]


def test_reservations_beyond_size_and_ahead_wait():
    population = Population(2, ahead=1)
    errors: dict[str, BaseException] = {}
    gate = threading.Event()
    members = [Member(lambda: (gate.wait(10), None)[1], 1) for _ in range(5)]
    threads = [_start(population, m, errors, f"m{i}") for i, m in enumerate(members)]
    assert _wait_until(lambda: len(population._reserved) == 3)
    time.sleep(0.05)
    assert len(population._reserved) == 3 and len(population._queue) == 2
    gate.set()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {} and population.most_reserved == 3 and population.most_together <= 2


def test_quiet_holds_every_launch_back():
    population = Population(2)
    errors: dict[str, BaseException] = {}
    member = Member(lambda: time.sleep(0.001), 3000)
    threads = [_start(population, member, errors, "m")]
    assert _wait_until(lambda: member.taken > 10)
    with population.quiet():
        before = member.taken
        time.sleep(0.1)
        during = member.taken - before
    assert during == 0
    assert population.activity()["quiets"] == 1 and population.activity()["quiet_s"] >= 0.1  # counted, and timed
    assert _wait_until(lambda: member.taken > before + 10)  # and it trains on afterwards
    member.steps = member.taken + 1  # end it
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {}


def test_a_quiet_hold_counts_its_wait_for_host_work_already_in_the_gate():
    """What a hold is made of: the wait for host work already launching (a validation, a warm-up step) to leave
    the gate is counted apart from the hold's whole time (and, on CUDA, from the wait for queued work)."""
    population = Population(2)
    inside, leave = threading.Event(), threading.Event()

    def launcher() -> None:
        with population.gate.launching():
            inside.set()
            leave.wait(30)

    thread = threading.Thread(target=launcher)
    thread.start()
    assert inside.wait(30)
    threading.Timer(0.2, leave.set).start()
    with population.quiet():
        time.sleep(0.05)
    thread.join(timeout=30)
    done = population.activity()
    assert done["quiets"] == 1 and 0.15 <= done["quiet_gate_s"] < done["quiet_s"]
    assert done["quiet_drain_s"] < 0.05  # nothing queued on a device here
    assert done["quiet_s"] >= done["quiet_gate_s"] + 0.05


def test_idle_means_nobody_trains_prepares_or_waits_for_a_place():
    """What a measurement queue asks before it waits for company: a member preparing, training or queued for a
    place makes the population busy; only once the last has left is it idle (a search's end)."""
    population = Population(1)
    errors: dict[str, BaseException] = {}
    assert population.idle()
    preparing, go_on = threading.Event(), threading.Event()

    def prepare() -> None:
        preparing.set()
        go_on.wait(30)

    first = Member(lambda: time.sleep(0.001), 100_000, prepare=prepare)
    second = Member(lambda: time.sleep(0.001), 100_000)
    threads = [_start(population, first, errors, "first")]
    assert preparing.wait(30) and not population.idle()  # reserved, preparing: not yet training
    threads.append(_start(population, second, errors, "second"))
    go_on.set()
    assert _wait_until(lambda: _joined(population, first))
    assert not population.idle()
    first.steps = first.taken + 1  # end it: the second, queued for the one place, joins
    threads[0].join(timeout=30)
    assert _wait_until(lambda: _joined(population, second)) and not population.idle()
    second.steps = second.taken + 1
    threads[1].join(timeout=30)
    assert population.idle() and errors == {}


def test_the_driver_ends_when_nobody_trains():
    population = Population(2)
    errors: dict[str, BaseException] = {}
    thread = _start(population, Member(lambda: None, 5), errors, "m")
    thread.join(timeout=30)
    assert _wait_until(lambda: population._driver is None, timeout=5)
    assert _wait_until(lambda: not any(t.name == "population-driver" for t in threading.enumerate()), timeout=5)


@pytest.mark.parametrize("size, ahead", [(0, 0), (2, -1), (True, 0), (2, 1.5)])
def test_bad_sizes_are_user_errors(size, ahead):
    with pytest.raises(NasutilError):
        Population(size, ahead=ahead)


def test_activity_counts_the_members_that_trained_together():
    """Three members of 20, 20 and 5 steps in a population of four: 45 member steps over the rounds
    driven, three at most together; the driver's time is counted, and the share of it spent waiting for a
    device is a share."""
    population = Population(4)
    errors: dict[str, BaseException] = {}
    members = [Member(lambda: time.sleep(0.001), steps) for steps in (20, 20, 5)]
    threads = [_start(population, m, errors, f"m{n}") for n, m in enumerate(members)]
    for t in threads:
        t.join(timeout=10)
    assert not errors
    activity = population.activity()
    assert sum(m.taken for m in members) == 45
    assert activity["most_together"] <= 3 and activity["rounds"] >= 20
    assert activity["mean_together"] == pytest.approx(45 / activity["rounds"])
    assert activity["driving_s"] > 0 and 0.0 <= activity["device_bound"] <= 1.0


def test_activity_says_where_the_members_that_did_not_step_were():
    """One member steps on while another pauses for host work at every step and a third waits for a place:
    the rounds count the paused one and the unjoined one, and host work that waited for a turn says how long."""
    population = Population(2, ahead=1, host_turns=1)
    errors: dict[str, BaseException] = {}
    steady = Member(lambda: time.sleep(0.001), 200)
    pausing = Member(lambda: (lambda: time.sleep(0.005)), 10)
    late = Member(lambda: None, 1, prepare=lambda: time.sleep(0.02))
    threads = [_start(population, steady, errors, "steady")]
    assert _wait_until(lambda: _joined(population, steady))
    threads.append(_start(population, pausing, errors, "pausing"))
    assert _wait_until(lambda: _joined(population, pausing))
    threads.append(_start(population, late, errors, "late"))
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {}
    activity = population.activity()
    assert 0 < activity["mean_paused"] < 1  # the pausing member, paused in part of the rounds
    assert 0 < activity["mean_unjoined"] < 1  # the late one, reserved while both places were taken
    assert activity["mean_turn_wait_ms"] >= 0 and population.turn_waits == 11  # 10 pieces of host work, 1 prepare


def test_activity_weighs_the_members_joined_by_time():
    """One member trains alone for a while, then a second joins, then both leave: the time-weighted mean lies
    between one and two, the first tenth of the span holds one member and the last tenths fewer than two, and
    the first join comes after the first member's preparation."""
    population = Population(2)
    errors: dict[str, BaseException] = {}
    first = Member(lambda: time.sleep(0.002), 150, prepare=lambda: time.sleep(0.05))
    second = Member(lambda: time.sleep(0.002), 40)
    threads = [_start(population, first, errors, "first")]
    assert _wait_until(lambda: _joined(population, first))
    time.sleep(0.1)
    threads.append(_start(population, second, errors, "second"))
    for thread in threads:
        thread.join(timeout=30)
    assert errors == {}
    activity = population.activity()
    assert 1.0 < activity["members_time_mean"] < 2.0
    assert activity["members_by_tenth"][0] == pytest.approx(1.0)
    assert max(activity["members_by_tenth"]) <= 2.0 and activity["members_by_tenth"][-1] <= 1.0 + 1e-9
    assert activity["members_time_mean"] == pytest.approx(sum(activity["members_by_tenth"]) / 10, abs=0.01)
    assert activity["first_join_after_s"] >= 0.05  # the first member prepared for 50 ms after its reservation
    assert activity["membership_span_s"] > 0.1


def test_activity_has_no_width_before_anyone_trained():
    assert "members_time_mean" not in Population(2).activity()


def test_membership_is_the_members_training_after_each_join_and_leave():
    """The timeline `population.png` draws: seconds since the first reservation, in order, and the count after
    each join and leave, back to none at the end."""
    population = Population(2)
    errors: dict[str, BaseException] = {}
    assert population.membership() == []
    members = [Member(lambda: time.sleep(0.001), 100_000) for _ in range(2)]
    threads = [_start(population, m, errors, f"m{n}") for n, m in enumerate(members)]
    assert _wait_until(lambda: all(_joined(population, m) for m in members))
    for m in members:
        m.steps = m.taken + 1
    for t in threads:
        t.join(timeout=30)
    timeline = population.membership()
    assert [n for _, n in timeline] == [1, 2, 1, 0]
    times = [t for t, _ in timeline]
    assert times == sorted(times) and times[0] >= 0 and errors == {}
    assert population.activity()["membership_timeline"] == timeline and population.activity()["places"] == 2
