"""Issue 54: the page `dvc plots show` / `dvc plots diff` write draws its curves offline. DVC's own page loads
vega, vega-lite and vega-embed from a CDN (blank offline); .dvc/config's plots.html_template points at
dvc_plots_template/index.html, which inlines them (built by scripts/vendor_plot_libs.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.helpers import REPO, Repo, in_ci

TEMPLATE = REPO / "dvc_plots_template" / "index.html"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# The colour of a plot's first revision (dvc_render's vega colour range starts with it), and how far an
# anti-aliased pixel of the line may stray from it.
LINE = np.array([0x94, 0x5D, 0xD6])
LINE_TOLERANCE = 40
# DVC's linear template draws 300 px wide: a curve across it colours most of those columns. A blank page
# colours none.
MIN_CURVE_COLUMNS = 150


def configured_template() -> Path:
    """The template .dvc/config names; DVC reads a relative html_template from the .dvc/ folder."""
    match = re.search(r"^\s*html_template\s*=\s*(.+?)\s*$", (REPO / ".dvc" / "config").read_text(), re.M)
    assert match, ".dvc/config sets no plots.html_template"
    return (REPO / ".dvc" / match.group(1)).resolve()


def test_template_is_configured_and_self_contained():
    assert configured_template() == TEMPLATE.resolve()
    text = TEMPLATE.read_text(encoding="utf-8")
    assert text.count("{plot_divs}") == 1
    assert "{scripts}" not in text, "DVC would put its CDN <script> tags there"
    assert not re.search(r"<script[^>]*\bsrc=", text), "the template must not load scripts from elsewhere"
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "vendor_plot_libs.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    message = (
        f"no headless browser on PATH (looked for {', '.join(BROWSERS)}); on Debian/Ubuntu: apt-get install -y chromium"
    )
    if in_ci():  # .ci/run installs one: there a missing browser must not pass as a skip
        pytest.fail(message)
    pytest.skip(message)


def screenshot(chrome: str, page: Path, png: Path, profile: Path) -> None:
    """`page` as headless Chromium draws it with no network at all (every host name fails to resolve)."""
    subprocess.run(
        [
            chrome,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            "--window-size=900,700",
            "--virtual-time-budget=5000",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=90,
        check=True,
    )
    assert png.is_file(), f"{chrome} wrote no screenshot of {page}"


def curve_columns(png: Path) -> tuple[int, int]:
    """(pixels of the line's colour, columns holding any) in the screenshot."""
    pixels = np.asarray(Image.open(png).convert("RGB")).astype(int)
    line = np.abs(pixels - LINE).max(axis=2) <= LINE_TOLERANCE
    return int(line.sum()), int(line.any(axis=0).sum())


@pytest.mark.e2e
def test_plots_page_draws_offline(tmp_path):
    chrome = browser()
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "home").mkdir()
    repo = Repo(root, tmp_path / "no-mirror", tmp_path / "home")
    rows = "".join(f"{step}\t{0.1 + 0.8 * (1 - np.exp(-step / 5)):.4f}\n" for step in range(21))
    (root / "acc.tsv").write_text("step\ttest_accuracy\n" + rows)
    (root / "dvc.yaml").write_text("plots:\n  - acc.tsv:\n      x: step\n      y: test_accuracy\n")
    repo.init_git_dvc()
    dvc = (sys.executable, "-m", "dvc")

    # Control: DVC's own page, from the CDN. Blank here proves the browser had no network.
    repo.run(*dvc, "plots", "show", "-o", str(tmp_path / "cdn"))
    screenshot(chrome, tmp_path / "cdn" / "index.html", tmp_path / "cdn.png", tmp_path / "profile-cdn")
    pixels, columns = curve_columns(tmp_path / "cdn.png")
    assert columns < MIN_CURVE_COLUMNS, (
        f"DVC's CDN page drew a curve ({pixels} px over {columns} columns): the browser reached the network, "
        "or DVC's default page no longer needs it, and this test proves nothing"
    )

    # The project's template, configured as in .dvc/config (here by absolute path), written elsewhere (-o).
    repo.run(*dvc, "config", "plots.html_template", str(configured_template()))
    repo.run(*dvc, "plots", "show", "-o", str(tmp_path / "ours"))
    page = tmp_path / "ours" / "index.html"
    assert "cdn.jsdelivr.net" not in page.read_text(encoding="utf-8")
    screenshot(chrome, page, tmp_path / "ours.png", tmp_path / "profile-ours")
    pixels, columns = curve_columns(tmp_path / "ours.png")
    assert columns >= MIN_CURVE_COLUMNS, (
        f"no curve drawn offline: {pixels} px of the line's colour over {columns} columns "
        f"(want >= {MIN_CURVE_COLUMNS}); see {tmp_path / 'ours.png'}"
    )

    # The README's command, `dvc plots diff --targets`, after an edit: the committed curve beside the
    # workspace's, on the page DVC writes to dvc_plots/ in the repository's root (no -o), drawn offline.
    repo.commit("the curve")
    (root / "acc.tsv").write_text("step\ttest_accuracy\n" + rows.replace("\t0.", "\t0.0"))
    repo.run(*dvc, "plots", "diff", "--targets", "acc.tsv")
    page = root / "dvc_plots" / "index.html"
    assert page.is_file() and "cdn.jsdelivr.net" not in page.read_text(encoding="utf-8")
    screenshot(chrome, page, tmp_path / "diff.png", tmp_path / "profile-diff")
    pixels, columns = curve_columns(tmp_path / "diff.png")
    assert columns >= MIN_CURVE_COLUMNS, f"plots diff drew no curve offline ({pixels} px over {columns} columns)"


def test_the_page_plots_diff_writes_in_the_repository_is_ignored_by_git():
    """`dvc plots diff` without -o writes dvc_plots/ in the repository's root: git must not list it."""
    for path in ("dvc_plots/index.html", "dvc_plots/static/a.svg"):
        result = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO)
        assert result.returncode == 0, f"{path} is not ignored by the repository's .gitignore"
