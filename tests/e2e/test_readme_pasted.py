"""Issue 54: the README's "Add your own run" entry, pasted into params.yaml of a clone as a newcomer would
(under `runs:`), followed by the README's steps 1 and 2, leaves the project's own checks green: every test
of the fast tier that reads params.yaml, run in that clone. The README's earlier example (a flow-style seed
list with a comment after it) failed 8 of them: DVC's YAML writer rewrites such a list on every `-S`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import REPO

pytestmark = pytest.mark.e2e

# How a test module reads the repository's own params.yaml or grid.yaml (by path, through the pipeline's
# default paths, or by running a command in the repository's root); modules that write a params.yaml of
# their own in a temporary folder do not match.
READS_PARAMS = re.compile(
    r'(REPO|ROOT) / "(params|grid)\.yaml"|PARAMS_FILE|GRID_FILE|load_params\(\)|chdir\((REPO|ROOT)\)|cwd=(REPO|ROOT)'
)


def yaml_blocks_editing_params(readme: str) -> list[str]:
    """The README's yaml code blocks that are run entries (they name a partition)."""
    return [block for block in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "partition:" in block]


def pasted_under_runs(params: str, block: str) -> str:
    """params.yaml with `block` as the first entry of its `runs:` mapping, as "add an entry under runs:" says."""
    lines = params.splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if line.rstrip() == "runs:")
    return "".join(lines[: at + 1]) + block + "".join(lines[at + 1 :])


def params_reading_modules(tests: Path) -> list[str]:
    return sorted(
        str(path.relative_to(tests.parent))
        for path in (tests / "unit").glob("test_*.py")
        if READS_PARAMS.search(path.read_text())
    )


def clone_with_working_changes(destination: Path) -> Path:
    """A clone of the repository with its uncommitted changes to tracked files (none in CI's fresh clone)."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(destination)], check=True)
    diff = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=REPO, capture_output=True, check=True).stdout
    if diff:
        subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=destination, input=diff, check=True)
    return destination


def test_the_pasting_helpers_find_the_entry_and_the_modules():
    readme = (REPO / "README.md").read_text()
    [block] = yaml_blocks_editing_params(readme)
    pasted = pasted_under_runs("profile: default\nruns:\n  old: {}\n", block)
    assert pasted.startswith("profile: default\nruns:\n" + block) and pasted.endswith("  old: {}\n")
    modules = params_reading_modules(REPO / "tests")
    assert "tests/unit/test_params_layout.py" in modules and "tests/unit/test_readme.py" in modules
    assert "tests/unit/test_user_mistakes.py" not in modules  # its params.yaml files are its own


def test_the_readme_run_pasted_into_a_clone_keeps_the_fast_tier_green(tmp_path):
    clone = clone_with_working_changes(tmp_path / "fedforget")
    if (REPO.parent / "shared").is_dir():  # the papers, as beside the repository
        (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    [block] = yaml_blocks_editing_params((clone / "README.md").read_text())
    params = clone / "params.yaml"
    params.write_text(pasted_under_runs(params.read_text(), block))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # beside the other xdist worker: one thread

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=clone, env=env, capture_output=True, text=True, timeout=timeout)

    for step in (["-m", "pipeline.profile"], ["-m", "pipeline.config", "--check"]):  # the README's steps 1 and 2
        done = run(sys.executable, *step)
        assert done.returncode == 0, (step, done.stdout, done.stderr)
    modules = params_reading_modules(clone / "tests")
    done = run(sys.executable, "-m", "pytest", "-q", "-m", "not e2e", "-p", "no:cacheprovider", *modules, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout), done.stdout[-2000:]
