"""How much host work a population gets done while many trial threads wait for a host turn, against the
same code at another git revision: a CPU benchmark of the population's wake-ups.

    python benchmarks/host_turn_waiters.py --compare-to 5e462c6^ --out benchmarks/results/cpu/host_turn_waiters

A search with `trainer.population=P` runs up to P + ahead trial threads; each builds and prepares its
candidate in a host turn (`Population.host_turn`, 4 at once by default), so with a large population most
of them wait for a turn. Here one member trains (a step of 20 us of interpreter work, the driver's
launches) while W threads each take host turns over and over (0.5 ms of interpreter work a turn, the
build and warm-up of a candidate), for W in `--waiters`. Each run is a fresh process that counts, over a
4 s window, the host turns taken a second and the driver's steps a second. The code under test is this
tree's `nasutil.colocate.population` and the same file at `--compare-to` (read by `git show`), run in
turn, the order alternated from repeat to repeat. Writes host_turn_waiters.json and .csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = "nasutil/colocate/population.py"

RUN = r'''
import importlib.util, sys, threading, time
spec = importlib.util.spec_from_file_location("population_under_test", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
waiters, window = int(sys.argv[2]), float(sys.argv[3])
population = mod.Population(4, host_turns=4)
stop = threading.Event()

def busy(ms):
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass

def host_work():
    while not stop.is_set():
        with population.host_turn():
            busy(0.5)

member = mod.Member(lambda: busy(0.02), 10**12)
driver = threading.Thread(target=population.run, args=(member,))
driver.start()
while member.taken < 100:
    time.sleep(0.01)
threads = [threading.Thread(target=host_work) for _ in range(waiters)]
for t in threads:
    t.start()
time.sleep(0.5)
steps, turns, started = member.taken, population.turn_waits, time.perf_counter()
time.sleep(window)
elapsed = time.perf_counter() - started
print(f"{(population.turn_waits - turns) / elapsed:.1f} {(member.taken - steps) / elapsed:.1f}")
stop.set()
member.steps = member.taken + 1
for t in threads:
    t.join()
driver.join()
'''


def run_once(module: Path, waiters: int, window_s: float) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", RUN, str(module), str(waiters), str(window_s)], check=True,
                         capture_output=True, text=True, cwd=ROOT, timeout=120).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare-to", required=True, metavar="REV", help="git revision of the other population")
    parser.add_argument("--waiters", type=int, nargs="+", default=[4, 16, 64, 256])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window", type=float, default=4.0, help="seconds counted per run")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.repeats < 1 or args.window <= 0 or any(w < 1 for w in args.waiters):
        parser.error("--repeats, --window and --waiters must be positive")
    try:
        other = subprocess.run(["git", "show", f"{args.compare_to}:{MODULE}"], check=True, capture_output=True,
                               text=True, cwd=ROOT).stdout
    except subprocess.CalledProcessError as exc:
        parser.error(f"cannot read {MODULE} at {args.compare_to}: {exc.stderr.strip()}")
    revision = subprocess.run(["git", "rev-parse", "--short", args.compare_to], capture_output=True, text=True,
                              check=True, cwd=ROOT).stdout.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        modules = {"this tree": ROOT / MODULE, f"at {revision}": Path(tmp) / "population.py"}
        modules[f"at {revision}"].write_text(other)
        for waiters in args.waiters:
            for repeat in range(args.repeats):
                order = list(modules) if repeat % 2 == 0 else list(reversed(modules))
                for code in order:
                    turns, steps = run_once(modules[code], waiters, args.window)
                    rows.append({"code": code, "waiters": waiters, "repeat": repeat, "host_turns_per_s": turns,
                                 "driver_steps_per_s": steps})
                    print(f"{code:>12}  {waiters:4d} waiting  {turns:8.1f} host turns/s  {steps:9.1f} steps/s",
                          flush=True)
    summary = [{"code": code, "waiters": waiters,
                "host_turns_per_s": statistics.median(r["host_turns_per_s"] for r in rows
                                                      if r["code"] == code and r["waiters"] == waiters),
                "driver_steps_per_s": statistics.median(r["driver_steps_per_s"] for r in rows
                                                        if r["code"] == code and r["waiters"] == waiters)}
               for waiters in args.waiters for code in modules]
    (args.out / "host_turn_waiters.json").write_text(json.dumps(
        {"command": " ".join(["python", "benchmarks/host_turn_waiters.py", *sys.argv[1:]]),
         "tree": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                                cwd=ROOT).stdout.strip(),
         "compare_to": revision, "window_s": args.window, "medians": summary, "runs": rows}, indent=1) + "\n")
    with (args.out / "host_turn_waiters.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
