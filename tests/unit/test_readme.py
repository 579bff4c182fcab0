"""The README a newcomer reads: short, current, and every link, path, command and example in it works.

The long reference lives in docs/; these tests keep the README from growing back into it, keep every
relative link of README.md and docs/ pointing at a file (and heading) that exists, and run the README's
two examples (a run entry, an algorithm module) as written.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

from support import synthetic

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
MAX_README_BYTES = 10_240

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def readme() -> str:
    return README.read_text()


def code_blocks(text: str, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(text) if lang == language]


def prose(text: str) -> str:
    """The text without fenced blocks and inline code, where a bracket is not a link."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for line in FENCE.sub("", path.read_text()).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            found.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
    return found


def relative_links(path: Path) -> list[str]:
    return [
        target for target in LINK.findall(prose(path.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", target)
    ]  # http:, https:, mailto: are not files here


# ---------------------------------------------------------------- size, links, no history in the README


def test_readme_is_at_most_10_kib():
    size = len(README.read_bytes())
    assert size <= MAX_README_BYTES, f"README.md is {size} bytes; move detail to docs/ (limit {MAX_README_BYTES})"


def test_docs_hold_the_pages_the_readme_indexes():
    for page in (
        "architecture",
        "configuration",
        "commands",
        "methodology",
        "claims-spec",
        "scaling",
        "performance",
        "measurements",
        "history/history",
        "papers/fedcurv",
        "papers/importance",
        "papers/tce",
        "papers/fedwavg",
    ):
        assert (ROOT / "docs" / f"{page}.md").is_file(), page


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file_and_heading(page):
    broken = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_link_checker_sees_a_broken_link_and_a_broken_anchor(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# There\n\n## Some `code`: here\n")
    page.write_text(
        "[a](there.md#some-code-here) [b](missing.md) [c](https://dvc.org) `[d](not-a-link.md)`\n"
        "```\n[e](in-a-block.md)\n```\n"
    )
    assert relative_links(page) == ["there.md#some-code-here", "missing.md"]
    assert "some-code-here" in anchors(tmp_path / "there.md")


def test_readme_names_no_issue_numbers_and_no_commit_hashes():
    text = readme()
    issues = re.findall(r"\bissues?\s+#?\d+|#\d+\b", text, re.I)
    hashes = [
        word for word in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"\d", word) and re.search(r"[a-f]", word)
    ]
    assert not issues, f"issue numbers belong in docs/history/: {issues}"
    assert not hashes, f"commit hashes belong in docs/: {hashes}"


def test_readme_states_the_current_claims_totals():
    """The README's headline is the committed ledger's Totals line, word for word (its format, both counts:
    test_report.py)."""
    lines = [
        line
        for line in (ROOT / "reports" / "claims.md").read_text().splitlines()
        if line.lstrip("*").startswith("Totals")
    ]
    assert lines, "reports/claims.md has no Totals line"
    assert lines[-1].strip() in readme(), f"the README's ledger is not the current one: {lines[-1]!r}"


def test_every_repository_path_the_readme_names_exists():
    tracked = {
        "pipeline",
        "scripts",
        "stages",
        "reports",
        "docs",
        "tests",
        "benchmarks",
        ".ci",
        "resolved",
        "fingerprint",
    }
    named = {token.rstrip("/") for token in re.findall(r"`([^`\s<>*]+)`", readme())}
    paths = [
        token
        for token in named
        if token.split("/")[0] in tracked or token in ("params.yaml", "grid.yaml", "dvc.yaml", "dvc.lock")
    ]
    assert "pipeline/report/seeds.py" in paths
    assert not [path for path in paths if not (ROOT / path).exists()]


def test_every_command_of_the_readme_names_a_script_or_module_that_exists():
    text = readme()
    for script in set(re.findall(r"bash (scripts/\S+\.sh|\.ci/run)", text)):
        assert (ROOT / script).is_file(), script
    for module in set(re.findall(r"python -m ([\w.]+)", text)):
        assert importlib.util.find_spec(module) is not None, module
    for stage_file in set(re.findall(r"dvc repro (stages/\S+/dvc\.yaml)", text)):
        assert (ROOT / stage_file).is_file(), stage_file


# ---------------------------------------------------------------- the README's examples, as written


def readme_run_entry() -> tuple[str, dict]:
    [block] = [b for b in code_blocks(readme(), "yaml") if "partition:" in b]
    [(key, entry)] = yaml.safe_load(textwrap.dedent(block)).items()
    return key, entry


def test_the_readme_run_entry_has_every_required_key_and_validates():
    from pipeline.config import check_params, load_params
    from pipeline.runs import RUN_REQUIRED

    key, entry = readme_run_entry()
    assert set(RUN_REQUIRED) <= set(entry), set(RUN_REQUIRED) - set(entry)
    params = load_params(ROOT / "params.yaml")
    # Not a run of the project, unless pasted as it stands (tests/e2e/test_readme_pasted.py pastes it).
    assert key not in params["runs"] or params["runs"][key] == entry
    params["runs"][key] = entry
    assert check_params(params) == []
    for step in ("python -m pipeline.config --check", "python -m pipeline.profile", "dvc repro"):
        assert step in readme()


def readme_algorithm(tmp_path: Path, monkeypatch):
    """The README's algorithm module, written to a file, checked and completed as the package's discovery
    does, and registered."""
    from pipeline import algorithms

    [source] = [b for b in code_blocks(readme(), "python") if "NAME =" in b]
    tree = ast.parse(source)
    name = next(
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["NAME"]
    )
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"pipeline.algorithms.{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    completed, known, load = algorithms.as_algorithm(module), algorithms.names(), algorithms.get_algorithm
    # as if the file were in pipeline/algorithms/: listed by names(), loaded by get_algorithm
    monkeypatch.setattr(algorithms, "names", lambda: [*known, name])
    monkeypatch.setattr(algorithms, "get_algorithm", lambda stem, *a: completed if stem == name else load(stem, *a))
    return completed, tree


def test_the_readme_algorithm_keeps_the_package_rule_and_checks_its_key(tmp_path, monkeypatch):
    from pipeline.algorithms import check_algorithm

    module, tree = readme_algorithm(tmp_path, monkeypatch)
    for node in ast.walk(tree):  # the package's rule: only common.py from pipeline.algorithms
        if isinstance(node, ast.ImportFrom) and node.module == "pipeline.algorithms":
            assert [alias.name for alias in node.names] == ["common"]
    assert f"algorithm: {{name: {module.NAME}, server_lr: 0.5}}" in readme()
    assert check_algorithm("runs.x.algorithm", {"name": module.NAME, "server_lr": 0.5}) == []
    assert check_algorithm("runs.x.algorithm", {"name": module.NAME, "server_lr": 0})
    assert check_algorithm("runs.x.algorithm", {"name": module.NAME, "sever_lr": 0.5})


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "sequential"])
def test_the_readme_algorithm_trains_a_round_and_steps_the_server_by_its_rate(tmp_path, monkeypatch, vectorized):
    from pipeline import models
    from pipeline.algorithms import get_algorithm, resolve_hyperparams
    from pipeline.rounds import initial_state, run_round

    module, _ = readme_algorithm(tmp_path, monkeypatch)
    data = synthetic.make_data([6, 9, 5], shape=(8, 8, 1), classes=4)
    run_settings = synthetic.run_settings(3, local_epochs=1, lr=0.1)

    def one_round(algorithm, hp):
        model = models.build_model("mlp_200", (8, 8, 1), 4, 0)
        hp = resolve_hyperparams({"name": algorithm.NAME, **hp})
        state = initial_state(model, algorithm, len(data.clients), hp)
        start = {n: p.clone() for n, p in state["params"].items()}
        return start, run_round(model, algorithm, hp, state, data, run_settings, 1, vectorized=vectorized).state

    start, averaged = one_round(get_algorithm("fedavg"), {})
    _, full_step = one_round(module, {"server_lr": 1.0})
    _, half_step = one_round(module, {"server_lr": 0.5})
    for name, value in start.items():
        torch.testing.assert_close(full_step["params"][name], averaged["params"][name])
        torch.testing.assert_close(half_step["params"][name], (value + averaged["params"][name]) / 2)
    assert any(not torch.equal(start[n], averaged["params"][n]) for n in start)  # the round did train
