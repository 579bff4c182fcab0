"""What every paper's report needs: the runs' results, tables with published numbers beside ours,
and claims evaluated on our numbers."""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

from pipeline.io import atomic_path, write_text

RUNS_DIR = Path("reports/runs")
NC = "NC"  # never reached the target (or diverged), as the papers write it


@dataclass
class RunResult:
    key: str
    settings: dict
    summary: dict
    rounds: list[int]
    accuracy: list[float]

    @property
    def diverged(self) -> bool:
        return self.summary.get("status") == "diverged"

    def rounds_to(self, target: float):
        """Rounds to reach `target`, or None (shown as NC) if the run never reached it. Taken from the
        run's summary when the run tracked that target, else from its accuracy curve."""
        from pipeline.engine import rounds_to_accuracy

        if any(abs(t - target) < 1e-12 for t in self.settings.get("targets", [])):
            return self.summary.get("rounds_to_accuracy", {}).get(f"{target:g}")
        return rounds_to_accuracy(self.rounds, self.accuracy, target)

    def paper_value(self, key: str):
        """A setting as the paper has it (before the default profile scaled it)."""
        scaled = self.settings.get("scaled", {})
        return scaled[key]["paper"] if key in scaled else self.settings.get(key)


def read_tsv_column(path: Path, column: str) -> tuple[list[int], list[float]]:
    if not path.is_file():
        return [], []
    with open(path) as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return [int(r["step"]) for r in rows], [float(r[column]) for r in rows]


def load_results(keys: list[str], runs_dir: Path = RUNS_DIR) -> dict[str, RunResult]:
    """Results of the runs that exist among `keys` (runs outside the active profile are absent)."""
    results = {}
    for key in keys:
        folder = runs_dir / key
        if not (folder / "metrics.json").is_file():
            continue
        rounds, accuracy = read_tsv_column(folder / "plots" / "metrics" / "test_accuracy.tsv", "test_accuracy")
        results[key] = RunResult(key, json.loads((folder / "settings.json").read_text()),
                                 json.loads((folder / "metrics.json").read_text()), rounds, accuracy)
    return results


def fmt(value, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NC
    if isinstance(value, str):
        return value
    return f"{value:.{digits}f}" if digits else f"{value:g}"


def difference(ours, paper):
    if ours is None or paper is None:
        return None
    return ours - paper


def write_table(out_dir: Path, name: str, title: str, header: list[str], rows: list[list], notes: list[str]) -> None:
    """`name`.md (a titled markdown table with notes) and `name`.csv (the same cells)."""
    cells = [[fmt(c) if not isinstance(c, str) else c for c in row] for row in rows]
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    lines += [""] + [f"- {note}" for note in notes]
    write_text(out_dir / f"{name}.md", "\n".join(lines) + "\n")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(cells)
    write_text(out_dir / f"{name}.csv", buffer.getvalue())


@dataclass
class Claim:
    paper: str
    id: str
    text: str
    status: str  # held | failed | inconclusive | not run
    evidence: str
    published: str = ""

    def as_dict(self) -> dict:
        return {"paper": self.paper, "id": self.id, "claim": self.text, "status": self.status,
                "evidence": self.evidence, "published": self.published}


def fewer_rounds_claim(paper, claim_id, text, published, results, first, second, target, strictly=True) -> Claim:
    """Claim: run `first` reaches `target` in fewer rounds than run `second` (NC counts as never)."""
    missing = [k for k in (first, second) if k not in results]
    if missing:
        return Claim(paper, claim_id, text, "not run", f"runs not in this profile: {', '.join(missing)}", published)
    a, b = results[first].rounds_to(target), results[second].rounds_to(target)
    evidence = f"{first}: {fmt(a)}, {second}: {fmt(b)} rounds to {target:.0%}"
    if a is None and b is None:
        return Claim(paper, claim_id, text, "inconclusive", evidence + " (neither reached it)", published)
    if strictly:
        held = b is None or (a is not None and a < b)
    else:
        held = b is None or (a is not None and a <= b)
    return Claim(paper, claim_id, text, "held" if held else "failed", evidence, published)


def plot_curves(path: Path, title: str, series: list[tuple[str, RunResult]], targets: list[float],
                ylim: tuple[float, float] = (0.5, 1.0)) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    styles = ["-", "--", ":", "-."]  # identical curves (FedProx with a tiny mu) stay visible
    for number, (label, result) in enumerate(series):
        ax.plot(result.rounds, result.accuracy, styles[number % len(styles)], linewidth=1.4,
                label=label + (" (diverged)" if result.diverged else ""))
    for target in targets:
        ax.axhline(target, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(loc="lower right")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def scaled_note(results: dict[str, RunResult]) -> list[str]:
    """One line per distinct scaling, naming the keys the default profile changed and their values."""
    seen = {}
    for result in results.values():
        scaled = result.settings.get("scaled", {})
        if scaled:
            text = ", ".join(f"{k} {v['paper']} -> {v['used']}" for k, v in sorted(scaled.items()))
            seen.setdefault(text, []).append(result.key)
    return [f"scaled (default profile) for {len(keys)} run(s): {text}" for text, keys in seen.items()]
