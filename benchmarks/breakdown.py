"""Where a train stage's seconds go (issue 52): one seed of a run trained from round 1 under cProfile, its time
split into the phases of `pipeline.training.train_seed`.

    python -m benchmarks.breakdown fedcurv_e10_fedcurv:0 tce_cifar10_tce_gn:0     # <run>:<seed> ...

Each seed trains in a scratch clone of this repository (its data linked, an empty checkpoint folder), in a
process of one thread, as a worker of a train stage does. A phase's seconds are the inclusive time of the
calls into its modules from outside them (cProfile's caller edges), so nothing is counted twice:

- data: loading the prepared arrays and the partition (`training.load_client_data`);
- Fisher: `pipeline/fisher.py` (the clients' Fisher diagonals, FedCurv's and Importance From Agent's);
- local training and aggregation: `rounds.run_round`, less the Fisher calls made inside it (the rest of an
  algorithm's hooks, and building a probed round's view, are in it);
- evaluation: `metrics.evaluate` (the accuracy curve; the test set where the curve is on validation);
- forgetting probes: `training.probe_round` and the presentation summary;
- checkpoints and the kept result: `pipeline/results.py`;
- outputs: the seed's files and figures (`pipeline/outputs.py`, `probe_files.py`);
- start-up: importing torch and the pipeline in a fresh process (timed apart, not profiled).

cProfile adds a cost per Python call, so Python-heavy phases read a little larger than they are: read the
shares, not the seconds. Writes benchmarks/results/breakdown.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"

# phase -> the functions (file suffix, name) whose inclusive time it is; a phase named by a module takes
# every call into that module from outside it.
PHASE_FUNCTIONS = {
    "data": [("pipeline/training.py", "load_client_data")],
    "evaluation": [("pipeline/metrics.py", "evaluate")],
    "forgetting probes": [("pipeline/training.py", "probe_round"), ("pipeline/forgetting.py", "presentation_summary")],
    "outputs": [("pipeline/outputs.py", "write_seed")],
}
PHASE_MODULES = {
    "Fisher": ("pipeline/fisher.py",),
    "checkpoints and kept result": ("pipeline/results.py",),
}
# Calls into a phase's module made from these files belong to the phase that made them: outputs.write_seed
# saves the last model through results.save_torch, which is output, not a checkpoint.
COUNTED_BY_CALLER = ("pipeline/outputs.py", "pipeline/probe_files.py")
ROUND = ("pipeline/rounds.py", "run_round")
ORDER = (
    "start-up",
    "data",
    "local training and aggregation",
    "Fisher",
    "evaluation",
    "forgetting probes",
    "checkpoints and kept result",
    "outputs",
    "other",
)
WORKER = (
    "import cProfile, sys, time\n"
    "from pipeline.train import train_one\n"  # first: OMP_WAIT_POLICY's default before torch loads
    "from pipeline.options import RuntimeOptions\n"
    "import torch, pipeline.training, pipeline.outputs\n"  # start-up, timed apart: not in the profile
    "run, seed, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]\n"
    "profile = cProfile.Profile()\n"
    "start = time.perf_counter()\n"
    "profile.runcall(train_one, run, seed, RuntimeOptions.from_environment(), True, True)\n"
    "print('WALL', time.perf_counter() - start)\n"
    "profile.dump_stats(out)\n"
)
STARTUP = "import torch, pipeline.training, pipeline.outputs"


def matches(key: tuple, suffix: str, name: str | None = None) -> bool:
    filename, _, function = key
    return filename.replace(os.sep, "/").endswith(suffix) and (name is None or function == name)


def inclusive(stats: dict, inside, outside=None) -> float:
    """Seconds of every call into a function `inside` accepts from a caller it does not (and, given
    `outside`, from a caller `outside` accepts)."""
    total = 0.0
    for callee, (_, _, _, _, callers) in stats.items():
        if not inside(callee):
            continue
        for caller, edge in callers.items():
            if not inside(caller) and (outside is None or outside(caller)):
                total += edge[3]
    return total


def phases(stats: dict, total: float) -> dict[str, float]:
    """The profiled seconds split into ORDER's phases (all but start-up); `other` is what none claims."""
    found: dict[str, float] = {}
    for phase, functions in PHASE_FUNCTIONS.items():
        found[phase] = sum(inclusive(stats, lambda k, f=f: matches(k, *f)) for f in functions)
    for phase, modules in PHASE_MODULES.items():
        found[phase] = inclusive(
            stats,
            lambda k, m=modules: any(matches(k, s) for s in m),
            lambda caller: not any(matches(caller, s) for s in COUNTED_BY_CALLER),
        )
    # The Fisher diagonals are computed in the clients' hooks (algorithms/fedcurv.py, importance.py), inside
    # run_round: its inclusive time holds them.
    rounds = inclusive(stats, lambda k: matches(k, *ROUND))
    found["local training and aggregation"] = max(0.0, rounds - found["Fisher"])
    claimed = sum(found.values())
    if claimed > total * 1.001:  # a call counted in two phases
        raise ValueError(f"the phases add up to {claimed:.2f} s, more than the {total:.2f} s profiled")
    found["other"] = total - claimed
    return found


def startup_seconds(clone: Path, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", STARTUP], cwd=clone, env=env, check=True)
    return time.perf_counter() - start


def profile_seed(clone: Path, run: str, seed: int, folder: Path, env: dict) -> dict:
    out = folder / f"{run}-{seed}.prof"
    done = subprocess.run(
        [sys.executable, "-c", WORKER, run, str(seed), str(out)], cwd=clone, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"{run}:{seed}: exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    wall = float(next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("WALL")))
    stats = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    split = phases(stats, wall)
    split["start-up"] = startup_seconds(clone, env)
    return {
        "run": run,
        "seed": seed,
        "profiled_seconds": round(wall, 2),
        "phases": {p: round(split[p], 2) for p in ORDER},
    }


def markdown(record: dict) -> str:
    lines = [
        f"# Where a train stage's seconds go ({record['when']})",
        "",
        f"{record['cpu']}; commit {record['commit']}; one process of one thread, under cProfile. Share of each "
        "seed's seconds (start-up included), then the seconds.",
        "",
        "| phase | " + " | ".join(f"`{r['run']}` s{r['seed']}" for r in record["seeds"]) + " |",
        "|---|" + "---|" * len(record["seeds"]),
    ]
    for phase in ORDER:
        cells = []
        for r in record["seeds"]:
            whole = r["profiled_seconds"] + r["phases"]["start-up"]
            cells.append(f"{100 * r['phases'][phase] / whole:.1f} % ({r['phases'][phase]:.1f} s)")
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    totals = " | ".join(f"{r['profiled_seconds'] + r['phases']['start-up']:.1f} s" for r in record["seeds"])
    lines += [f"| **whole seed** | {totals} |", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    """Profile each <run>:<seed>, then write the record and its table."""
    from benchmarks.contention import cpu_name, environment, scratch_clone

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", nargs="+", help="<run>:<seed> of the active profile")
    args = parser.parse_args(argv)
    chosen = []
    for item in args.seeds:
        run, _, seed = item.partition(":")
        if not seed.isdigit():
            sys.exit(f"error: {item}: expected <run>:<seed>, e.g. fedcurv_e10_fedcurv:0")
        chosen.append((run, int(seed)))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    record: dict = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu_name(),
        "commit": commit.stdout.strip(),
        "seeds": [],
    }
    with tempfile.TemporaryDirectory() as folder:
        clone = scratch_clone(Path(folder))
        for index, (run, seed) in enumerate(chosen):
            env = environment({"FEDFORGET_WORKERS": "1", "FEDFORGET_THREADS": "1"}, Path(folder) / f"ck{index}")
            record["seeds"].append(profile_seed(clone, run, seed, Path(folder), env))
            print(json.dumps(record["seeds"][-1]), flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "breakdown.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / "breakdown.md").write_text(markdown(record))
    print(markdown(record))


if __name__ == "__main__":
    main()
