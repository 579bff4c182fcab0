"""python -m pipeline.report: rebuild every paper's report from reports/runs/ and write the index."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from pipeline.config import GRID_FILE, load_checked_params, read_yaml
from pipeline.errors import exit_on_user_error
from pipeline.io import write_json, write_text
from pipeline.report import fedcurv, importance
from pipeline.report.common import RUNS_DIR, fmt, load_results

REPORTS_DIR = Path("reports")
PUBLISHED = Path(__file__).with_name("published.yaml")
PAPERS = [("fedcurv", fedcurv, "Shoham et al. 2019, Overcoming Forgetting in Federated Learning on Non-IID Data"),
          ("importance", importance, "Kim, Kim & Kim, Overcoming Forgetting in Federated Learning via Importance "
                                     "From Agent")]


def claims_markdown(claims: list, profile: str) -> str:
    lines = ["# Claims ledger", "", f"Profile: **{profile}**. Each claim a paper makes, checked on our numbers: "
             "held, failed, inconclusive (our runs cannot decide it, e.g. neither run reached the target) "
             "or not run (with why).", "",
             "| paper | claim | published | status | our numbers |", "|---|---|---|---|---|"]
    lines += [f"| {c.paper} | {c.text} | {c.published} | **{c.status}** | {c.evidence} |" for c in claims]
    counts = {s: sum(c.status == s for c in claims) for s in ("held", "failed", "inconclusive", "not run")}
    lines += ["", "Totals: " + ", ".join(f"{n} {s}" for s, n in counts.items())]
    return "\n".join(lines) + "\n"


def index_markdown(profile: str, results: dict, built: list[tuple[str, str, Path]]) -> str:
    lines = ["# Reports", "", f"Built by `dvc repro` from the **{profile}** profile "
             f"({'the papers’ published settings' if profile == 'paper' else 'scaled to a laptop CPU; each table says what was scaled'}).",
             "", "- [claims.md](claims.md): every claim of every paper, held / failed / inconclusive / not run", ""]
    for name, title, folder in built:
        lines.append(f"## {title}")
        for path in sorted(folder.iterdir()):
            if path.suffix in (".md", ".png"):
                lines.append(f"- [{path.name}]({name}/{path.name})")
        lines.append("")
    lines += ["## Runs", "", "| run | status | final accuracy | best accuracy | rounds | seconds |", "|---|---|---|---|---|---|"]
    for key, result in sorted(results.items()):
        timing = RUNS_DIR / key / "timing.json"
        seconds = json.loads(timing.read_text())["seconds_total"] if timing.is_file() else None
        lines.append(f"| {key} | {result.summary.get('status')} | {fmt(result.summary.get('final_accuracy'), 4)} | "
                     f"{fmt(result.summary.get('best_accuracy'), 4)} | {result.summary.get('rounds_completed')} | "
                     f"{fmt(seconds, 1)} |")
    return "\n".join(lines) + "\n"


@exit_on_user_error
def main() -> None:
    params = load_checked_params()
    profile = params["profile"]
    grid = read_yaml(GRID_FILE)["grid"]
    results = load_results(sorted(grid["runs"]))
    published = yaml.safe_load(PUBLISHED.read_text())
    claims, built = [], []
    for name, module, title in PAPERS:
        folder = REPORTS_DIR / name
        claims += module.build(results, published[name], folder, profile)
        built.append((name, title, folder))
    write_text(REPORTS_DIR / "claims.md", claims_markdown(claims, profile))
    statuses = [c.status for c in claims]
    write_json(REPORTS_DIR / "claims.json", {
        "held": statuses.count("held"), "failed": statuses.count("failed"),
        "inconclusive": statuses.count("inconclusive"), "not_run": statuses.count("not run"),
        "claims": {name: {c.id: c.status for c in claims if c.paper == name} for name, _, _ in PAPERS}})
    write_text(REPORTS_DIR / "README.md", index_markdown(profile, results, built))
    print(f"reports: {len(results)} runs, claims " + ", ".join(f"{s}: {statuses.count(s)}" for s in sorted(set(statuses))))


if __name__ == "__main__":
    main()
