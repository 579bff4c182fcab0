"""Check the committed results by training a sample of them again, in a scratch folder.

    python -m pipeline.verify --sample 3              # three (run, seed) pairs drawn at random
    python -m pipeline.verify --stage fedcurv_e10_fedavg --seeds 0,1
    python -m pipeline.verify --sample 1 --cheap      # one short one, drawn from the commit (what CI runs)

Each chosen (run, seed) is trained from scratch (no checkpoint, no kept result) into a temporary folder with
the committed settings and code, and its outputs are set beside the committed ones in reports/runs/:

- on the CPU kind that made them (the processor's name and its kernels, AVX2 or AVX-512, and one thread a
  process, as timing.json records them) the outputs must be the same bytes (metrics, curves, probe files,
  settings): a difference is a failure and the exit code is 1;
- on another CPU kind float32 rounds differently, and outputs committed by other code (their timing.json names
  another code digest, or none: results kept from before a change of the engine) are not this code's, so the bytes may differ: each headline metric's difference is
  reported, and the claims ledger is built twice, with the committed seeds and with the retrained ones in their
  place, to say whether any claim's verdict moves.

One line per (run, seed), then a summary. The draw is seeded by --seed (default: the commit's hash), so two
runs of the command at one commit verify the same sample. The data stages must have run (or a mirror be set:
FEDFORGET_DATA_MIRROR), as for `dvc repro`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipeline.errors import UserError, exit_on_user_error
from pipeline.options import RuntimeOptions
from pipeline.paths import RESOLVED_DIR, RUNS_DIR
from pipeline.report.common import cpu_identity

# Outputs that must be the same bytes on the same CPU kind: all but timing.json (seconds, the commit) and the
# figures (PNG bytes depend on the fonts and matplotlib build, not on the numbers).
COMPARED_SUFFIXES = (".json", ".tsv")
NOT_COMPARED = ("timing.json",)
CHEAP_SECONDS = 30.0  # --cheap: a (run, seed) whose committed training took at most this long


@dataclass
class Check:
    run: str
    seed: int
    same_kind: bool
    same_code: bool = True  # the committed seed's timing.json names the code digest this commit trains with
    differing: list[str] = field(default_factory=list)  # files whose bytes differ
    metrics: dict = field(default_factory=dict)  # metric -> (committed, retrained) where they differ
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.run}-seed{self.seed}"

    @property
    def failed(self) -> bool:
        return self.same_kind and self.same_code and bool(self.differing)

    def line(self) -> str:
        kind = ("same CPU kind" if self.same_kind else "another CPU kind") + (
            "" if self.same_code else ", committed by other code"
        )
        if not self.differing:
            return f"{self.key}: identical bytes ({kind}, {self.seconds:.0f} s)"
        if self.same_kind and self.same_code:
            return f"{self.key}: DIFFERS on the same CPU kind: {', '.join(self.differing[:4])}" + (
                f" and {len(self.differing) - 4} more" if len(self.differing) > 4 else ""
            )
        shown = ", ".join(f"{name} {old} -> {new}" for name, (old, new) in list(self.metrics.items())[:4])
        return f"{self.key}: {len(self.differing)} files differ ({kind}); {shown or 'no headline metric moved'}"


def this_cpu_kind(threads: int) -> tuple:
    import torch

    from pipeline.distributed import describe_device

    torch.set_num_threads(threads)
    return cpu_identity(describe_device(torch.device("cpu")))


def committed_pairs(runs_dir: Path = RUNS_DIR) -> list[tuple[str, int]]:
    """Every (run, seed) of the profile (its resolved seeds) that has committed outputs."""
    pairs = []
    for path in sorted(RESOLVED_DIR.glob("*.json")):
        for seed in json.loads(path.read_text())["seeds"]:
            if (runs_dir / path.stem / f"seed{seed}" / "metrics.json").is_file():
                pairs.append((path.stem, seed))
    return pairs


def committed_seconds(run: str, seed: int, runs_dir: Path = RUNS_DIR) -> float:
    timing = runs_dir / run / f"seed{seed}" / "timing.json"
    return json.loads(timing.read_text()).get("seconds_total", float("inf")) if timing.is_file() else float("inf")


def commit_seed() -> int:
    """The draw's default seed: the commit's hash (so CI verifies one fixed sample a commit)."""
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return int(hashlib.sha256(done.stdout.strip().encode()).hexdigest()[:12], 16)


def choose(pairs: list[tuple[str, int]], sample: int, seed: int, cheap: bool) -> list[tuple[str, int]]:
    if cheap:
        pairs = [p for p in pairs if committed_seconds(*p) <= CHEAP_SECONDS]
    if not pairs:
        raise UserError("no committed (run, seed) to verify" + (" that trained within 30 s (--cheap)" if cheap else ""))
    return sorted(random.Random(seed).sample(pairs, min(sample, len(pairs))))


def files_of(folder: Path) -> dict[str, Path]:
    return {
        p.relative_to(folder).as_posix(): p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix in COMPARED_SUFFIXES and p.name not in NOT_COMPARED
    }


def metric_leaves(tree, prefix: str = "") -> dict[str, float]:
    if isinstance(tree, dict):
        return {k: v for key, value in tree.items() for k, v in metric_leaves(value, f"{prefix}{key}.").items()}
    if isinstance(tree, (int, float)) and not isinstance(tree, bool):
        return {prefix.rstrip("."): float(tree)}
    return {}


def compare_folders(committed: Path, retrained: Path, check: Check) -> Check:
    ours, theirs = files_of(retrained), files_of(committed)
    check.differing = sorted(
        name
        for name in set(ours) | set(theirs)
        if name not in ours or name not in theirs or ours[name].read_bytes() != theirs[name].read_bytes()
    )
    if "metrics.json" in ours and "metrics.json" in theirs:
        old = metric_leaves(json.loads(theirs["metrics.json"].read_text()))
        new = metric_leaves(json.loads(ours["metrics.json"].read_text()))
        check.metrics = {
            k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k) and k != "step"
        }
    return check


def ensure_inputs(runs: list[str]) -> None:
    """Build the partitions (and datasets) the chosen runs read where this clone lacks them, as `dvc repro`
    would (a fresh clone has the data's records in git, the arrays in DVC's cache): `dvc repro
    partition@<name>`, which downloads from FEDFORGET_DATA_MIRROR where there is no internet."""
    from pipeline.paths import PARTITIONS_DIR

    needed = sorted({json.loads((RESOLVED_DIR / f"{run}.json").read_text())["partition"] for run in runs})
    missing = [name for name in needed if not (PARTITIONS_DIR / name / "clients.npz").is_file()]
    if not missing:
        return
    print(f"building the inputs first: dvc repro {' '.join(f'partition@{m}' for m in missing)}", flush=True)
    done = subprocess.run(
        ["dvc", "repro", *[f"partition@{m}" for m in missing]], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise UserError(
            f"dvc repro {' '.join(f'partition@{m}' for m in missing)}: failed ({last}); the data "
            "stages need the internet or a mirror (FEDFORGET_DATA_MIRROR)"
        )


def code_digest_of(run: str) -> str:
    """The digest of the code this commit trains `run` with (fingerprint.run_code_digest), as timing.json
    records it."""
    from pipeline.fingerprint import run_code_digest
    from pipeline.inputs import read_resolved

    return run_code_digest(read_resolved(run)["algorithm"]["name"])


def retrain(run: str, seed: int, scratch: Path, options: RuntimeOptions) -> tuple[Path, float]:
    """Train (run, seed) from scratch with the committed settings into scratch/runs; its folder and seconds."""
    import time

    import torch

    from pipeline import outputs, training
    from pipeline.inputs import read_resolved
    from pipeline.settings import RunSettings

    torch.set_num_threads(options.threads)
    settings = RunSettings.from_resolved(read_resolved(run), seed)
    start = time.perf_counter()
    result = training.train_seed(settings, replace(options, checkpoints=scratch / "checkpoints", progress=False))
    assert result is not None  # one process: it is rank 0
    outputs.write_seed(
        result, options.speed_record(), figures=False, runs_dir=scratch / "runs", models_dir=scratch / "models"
    )
    return scratch / "runs" / run / f"seed{seed}", time.perf_counter() - start


def verdicts_with(replaced: dict[tuple[str, int], Path], scratch: Path) -> dict[str, tuple[str, str]]:
    """{claim id: (committed verdict, verdict with the retrained seeds)} for the claims whose verdict moves."""
    from pipeline.report import __main__ as report

    before = report.ledger_statuses(RUNS_DIR)
    overlay = scratch / "overlay"
    shutil.copytree(RUNS_DIR, overlay, ignore=shutil.ignore_patterns("*.png"))
    for (run, seed), folder in replaced.items():
        target = overlay / run / f"seed{seed}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target)
    after = report.ledger_statuses(overlay)
    return {cid: (before[cid], after.get(cid, "missing")) for cid in before if before[cid] != after.get(cid)}


@exit_on_user_error
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=1, help="how many (run, seed) pairs to draw (default 1)")
    parser.add_argument("--seed", type=int, help="the draw's random seed (default: from the commit's hash)")
    parser.add_argument("--stage", help="verify this run (train@RUN or RUN) instead of a random draw")
    parser.add_argument("--seeds", help="with --stage: these of its seeds (default: all), e.g. 0,1")
    parser.add_argument(
        "--cheap", action="store_true", help=f"draw among seeds that trained within {CHEAP_SECONDS:g} s"
    )
    args = parser.parse_args(argv)
    if args.sample < 1:
        raise UserError(f"--sample: {args.sample} is not allowed; expected an integer >= 1")
    options = RuntimeOptions.from_environment()
    pairs = committed_pairs()
    if args.stage:
        run = args.stage.removeprefix("train@")
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [s for r, s in pairs if r == run]
        chosen = [(run, s) for s in seeds]
        missing = [f"{r}-seed{s}" for r, s in chosen if (r, s) not in pairs]
        if missing or not chosen:
            raise UserError(f"--stage {args.stage}: no committed outputs for {', '.join(missing) or run} in {RUNS_DIR}")
    else:
        chosen = choose(pairs, args.sample, args.seed if args.seed is not None else commit_seed(), args.cheap)
    ensure_inputs(sorted({run for run, _ in chosen}))
    here = this_cpu_kind(options.threads)
    checks, replaced = [], {}
    with tempfile.TemporaryDirectory(prefix="fedforget-verify-") as folder:
        scratch = Path(folder)
        for run, seed in chosen:
            committed = RUNS_DIR / run / f"seed{seed}"
            timing = json.loads((committed / "timing.json").read_text())
            retrained, seconds = retrain(run, seed, scratch, options)
            same_code = timing.get("code") == code_digest_of(run)
            check = compare_folders(
                committed,
                retrained,
                Check(run, seed, cpu_identity(timing.get("device", {})) == here, same_code, seconds=seconds),
            )
            checks.append(check)
            if check.differing:
                replaced[(run, seed)] = retrained
            print(check.line(), flush=True)
        # a difference that is no failure (another CPU kind, other code): does it move a verdict?
        moved = verdicts_with(replaced, scratch) if any(c.differing and not c.failed for c in checks) else {}
    same = [c for c in checks if c.same_kind and c.same_code]
    print(
        f"verified {len(checks)} (run, seed): {sum(not c.differing for c in checks)} identical, "
        f"{sum(c.failed for c in checks)} differing on the CPU kind that made them, "
        f"{sum(bool(c.differing) and c.same_code and not c.same_kind for c in checks)} differing on another CPU kind"
        + (
            f", {sum(bool(c.differing) and not c.same_code for c in checks)} differing and committed by other code"
            if any(not c.same_code for c in checks)
            else ""
        )
        + (
            f"; verdicts moved: {', '.join(f'{k} {a} -> {b}' for k, (a, b) in moved.items())}"
            if moved
            else ("; no claim's verdict moves" if replaced and len(same) < len(checks) else "")
        )
    )
    if any(c.failed for c in checks):
        sys.exit(1)


if __name__ == "__main__":
    main()
