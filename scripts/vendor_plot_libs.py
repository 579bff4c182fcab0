#!/usr/bin/env python3
"""Rebuild dvc_plots_template/: the page template that `dvc plots show` and `dvc plots diff` fill (issue 54).

DVC's own page loads vega, vega-lite and vega-embed from cdn.jsdelivr.net, so offline it is blank. This
script takes the three libraries' minified builds from their npm tarballs, keeps them (and their licenses)
in dvc_plots_template/, and writes dvc_plots_template/index.html with the three scripts inlined: the page
DVC writes from it is self-contained, whatever folder it lands in (dvc_plots/ or `-o DIR`).
.dvc/config points at it: `plots.html_template = ../dvc_plots_template/index.html` (DVC reads a relative
html_template from the .dvc/ folder, not from the repository root).

    python scripts/vendor_plot_libs.py                  `npm pack` the pinned versions (needs the npm registry)
    python scripts/vendor_plot_libs.py --tarballs DIR   use the tarballs in DIR (from `npm pack`, offline)
    python scripts/vendor_plot_libs.py --check          offline: index.html is what the vendored files give

Pinned versions: the newest of the majors DVC 3.67's dvc-render 1.0.2 loads from the CDN (vega@5.20.2,
vega-lite@5.2.0, vega-embed@6.18.2), mutually compatible (vega-lite 5.23.0 wants vega ^5.24.0, vega-embed
6.29.0 vega ^5.21.0). sha256 of the `npm pack` tarballs (registry.npmjs.org), checked before use:
    vega-5.33.1.tgz        1b8504b6731c5311be3269c4d84ca996a5cc293bc772283293ede20c490e16c3
    vega-lite-5.23.0.tgz   e4cbfdd8f6f1abe381c59cd558fd6a559c12b1496bfdf2e0c3295263a40fe4da
    vega-embed-6.29.0.tgz  ecf1ee709c2bac9e0a4ead6908114b05b62c71493e10a8a4308109bb070f8eb1
All three are BSD-3-Clause. The vega tarball carries no LICENSE file: dvc_plots_template/LICENSE.vega is the
vega/vega repository's root LICENSE (github.com/vega/vega, commit 77c220194d783a4d5223a54eea22142be0265262),
kept by hand; the other two LICENSE files come from their tarballs.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "dvc_plots_template"

# (npm name, version, sha256 of the npm tarball, global the build defines)
PACKAGES = (
    ("vega", "5.33.1", "1b8504b6731c5311be3269c4d84ca996a5cc293bc772283293ede20c490e16c3", "vega"),
    ("vega-lite", "5.23.0", "e4cbfdd8f6f1abe381c59cd558fd6a559c12b1496bfdf2e0c3295263a40fe4da", "vegaLite"),
    ("vega-embed", "6.29.0", "ecf1ee709c2bac9e0a4ead6908114b05b62c71493e10a8a4308109bb070f8eb1", "vegaEmbed"),
)

# dvc_render.html.HTML.embed() fills the template with str.replace of these three; a template without
# plot_divs is refused. "scripts" is where DVC puts its CDN <script> tags: left out on purpose.
PLOTS, REFRESH, SCRIPTS = "{plot_divs}", "{refresh_tag}", "{scripts}"
# What must not appear inside an inlined script: DVC's placeholders (it would replace them), and what
# would end or upset the HTML parser's script state.
FORBIDDEN_IN_SCRIPT = (PLOTS, REFRESH, SCRIPTS, "</script", "<!--", "<script")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def npm_pack(folder: Path) -> None:
    specs = [f"{name}@{version}" for name, version, _, _ in PACKAGES]
    subprocess.run(["npm", "pack", "--silent", *specs], cwd=folder, check=True, stdout=subprocess.DEVNULL)


def member(tarball: Path, path: str) -> bytes | None:
    with tarfile.open(tarball) as tar:
        try:
            handle = tar.extractfile(f"package/{path}")
        except KeyError:
            return None
        return handle.read() if handle else None


def extract(tarballs: Path) -> None:
    """The minified builds and LICENSE files from the checked tarballs into dvc_plots_template/."""
    for name, version, digest, _ in PACKAGES:
        tarball = tarballs / f"{name}-{version}.tgz"
        if not tarball.is_file():
            sys.exit(f"missing {tarball}")
        if sha256(tarball) != digest:
            sys.exit(f"{tarball}: sha256 {sha256(tarball)}, expected {digest}")
        build = member(tarball, f"build/{name}.min.js")
        if build is None:
            sys.exit(f"{tarball} has no build/{name}.min.js")
        (OUT / f"{name}.min.js").write_bytes(build)
        license_text = member(tarball, "LICENSE")
        if license_text is not None:
            (OUT / f"LICENSE.{name}").write_bytes(license_text)
        elif not (OUT / f"LICENSE.{name}").is_file():
            sys.exit(f"{tarball} has no LICENSE and dvc_plots_template/LICENSE.{name} is missing")


def page() -> str:
    """index.html from the vendored files."""
    licenses = []
    scripts = []
    for name, version, _, global_name in PACKAGES:
        code = (OUT / f"{name}.min.js").read_text(encoding="utf-8")
        if f'version="{version}"' not in code and f'"{version}"' not in code:
            sys.exit(f"dvc_plots_template/{name}.min.js is not {name} {version}")
        for text in FORBIDDEN_IN_SCRIPT:
            if text.lower() in code.lower():
                sys.exit(f"{name}.min.js contains {text!r}: it cannot be inlined as it is")
        license_text = (OUT / f"LICENSE.{name}").read_text(encoding="utf-8").strip()
        if "{" in license_text or "--" in license_text:
            sys.exit(f"LICENSE.{name} has text that cannot go in an HTML comment of the template")
        licenses.append(f"{name} {version} (BSD-3-Clause):\n\n{license_text}\n")
        scripts.append(f"    <script>/* {name} {version}: window.{global_name} */\n{code.rstrip()}\n</script>")
    names = ", ".join(f"{name} {version}" for name, version, _, _ in PACKAGES)
    header = (
        f"DVC plots page template (.dvc/config plots.html_template; issue 54) with {names} inlined,\n"
        "so that the page DVC writes draws offline, wherever it is written. Generated by\n"
        "scripts/vendor_plot_libs.py from the npm tarballs: do not edit by hand.\n\n"
    )
    body = "\n".join(licenses)
    return f"""<!DOCTYPE html>
<html>
<head>
    <meta charset="utf-8">
    {REFRESH}
    <title>DVC Plot</title>
<!--
{header}{body}-->
{chr(10).join(scripts)}
    <style>
        table {{
            border-spacing: 15px;
        }}
    </style>
</head>
<body>
    {PLOTS}
</body>
</html>
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--tarballs", type=Path, help="folder holding the npm tarballs (no npm pack)")
    group.add_argument("--check", action="store_true", help="only check index.html against the vendored files")
    args = parser.parse_args()
    if args.check:
        if (OUT / "index.html").read_text(encoding="utf-8") != page():
            sys.exit("dvc_plots_template/index.html is out of date: python scripts/vendor_plot_libs.py")
        print("dvc_plots_template/index.html is up to date")
        return
    OUT.mkdir(exist_ok=True)
    if args.tarballs:
        extract(args.tarballs)
    else:
        with tempfile.TemporaryDirectory() as folder:
            npm_pack(Path(folder))
            extract(Path(folder))
    text = page()
    assert text.count(PLOTS) == 1 and text.count(REFRESH) == 1 and SCRIPTS not in text
    (OUT / "index.html").write_text(text, encoding="utf-8")
    print(f"wrote dvc_plots_template/index.html ({len(text.encode()) // 1024} KiB)")


if __name__ == "__main__":
    main()
