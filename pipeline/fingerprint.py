"""Fingerprint stage: the training engine's code, summed up in one small file the train stages depend on.

    python -m pipeline.fingerprint    # -> fingerprint/engine.json

Why a stage of its own: DVC parses and rewrites the whole dvc.lock after every stage it runs (ruamel's
round-trip YAML, pure Python), so each line of the lock costs every stage of a `dvc repro`. With ~150
stages, listing the engine's modules in every train stage made the lock 18,000 lines and its
rewriting most of a stage's ~10 s of start-up. The train stages depend on this file (and on their own
algorithm's module, so that editing one algorithm retrains only its runs); this stage depends on all
of pipeline/ and writes the digests of ENGINE_CODE only: a changed engine module changes this file and
every train stage reruns; an edit anywhere else reruns this stage alone, its file unchanged.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from pipeline.errors import exit_on_user_error
from pipeline.io import sha256_file, write_json

OUTPUT = Path("fingerprint/engine.json")

# The modules whose code decides a run's numbers, whatever its algorithm: the one list of them (dvc.yaml's
# fingerprint stage depends on all of pipeline/; tests/test_fingerprint.py checks this list against what
# pipeline.train imports). The download, partition and resolve stages' files are not here: training
# reads their outputs through pipeline/inputs.py's loaders, which are.
ENGINE_CODE = tuple(f"pipeline/{name}" for name in (
    "train.py", "clientdata.py", "cohort.py", "cohort_mlp.py", "rounds.py", "optimizers.py", "losses.py",
    "metrics.py", "forgetting.py", "fisher.py", "models.py", "inputs.py", "settings.py",
    "path_score.py", "distributed.py", "algorithms/__init__.py", "algorithms/common.py"))


def algorithm_code(name: str) -> str:
    return f"pipeline/algorithms/{name}.py"


def file_digests(paths, root: Path) -> dict:
    """path -> sha256 of its bytes."""
    return {path: sha256_file(root / path) for path in paths}


def combined_digest(digests: dict) -> str:
    """One sha256 over the (path, digest) pairs in path order."""
    summary = hashlib.sha256()
    for path in sorted(digests):
        summary.update(f"{path}\0{digests[path]}\n".encode())
    return summary.hexdigest()


def run_code_digest(algorithm: str, root: Path | None = None) -> str:
    """The code a run of `algorithm` trains with: the engine and that algorithm's module (a checkpoint
    written by other code, a fixed bug say, is stale)."""
    root = root or Path(__file__).resolve().parents[1]
    return combined_digest(file_digests((*ENGINE_CODE, algorithm_code(algorithm)), root))


@exit_on_user_error
def main() -> None:
    digests = file_digests(ENGINE_CODE, Path("."))
    write_json(OUTPUT, {"files": digests, "sha256": combined_digest(digests)})
    print(f"{OUTPUT}: {len(digests)} engine modules, sha256 {combined_digest(digests)[:16]}")


if __name__ == "__main__":
    main()
