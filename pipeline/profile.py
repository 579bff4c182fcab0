"""Switch the active profile and rewrite grid.yaml, the lists of datasets, partitions and runs dvc.yaml's
stages iterate over.

    python -m pipeline.profile default    # laptop CPU: scaled runs (runs.<key>.scaled applied)
    python -m pipeline.profile paper      # the papers' published settings, for a GPU
    python -m pipeline.profile gpu_day    # the papers' models, their headline runs fitted to one GPU-day
    python -m pipeline.profile            # rewrite grid.yaml for the current profile (after editing runs)

Only the `profile:` line of params.yaml is changed (comments and layout are kept).
"""

from __future__ import annotations

import argparse
import re

import yaml

from pipeline.config import GRID_FILE, PARAMS_FILE, PROFILES, check_params, derive_grid, read_yaml
from pipeline.errors import UserError, exit_on_user_error, refuse_disk_errors
from pipeline.io import write_text
from pipeline.runs import expand_templates
from pipeline.yamlfile import load_yaml

GRID_HEADER = (
    "# Written by `python -m pipeline.profile` from params.yaml; do not edit by hand.\n"
    "# dvc.yaml's stages iterate over these ids (DVC's templating cannot filter runs by profile).\n"
)


def set_profile_line(text: str, profile: str) -> str:
    updated, count = re.subn(r"(?m)^profile:.*$", f"profile: {profile}", text, count=1)
    if count != 1:
        raise UserError(f"{PARAMS_FILE}: no top-level `profile:` line to change")
    return updated


@exit_on_user_error
@refuse_disk_errors
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", nargs="?", choices=PROFILES)
    args = parser.parse_args(argv)
    read_yaml(PARAMS_FILE)  # a missing file or invalid YAML is one line, not a traceback
    text = PARAMS_FILE.read_text()
    if args.profile:
        text = set_profile_line(text, args.profile)
    params = load_yaml(text, str(PARAMS_FILE))
    if not isinstance(params, dict):
        raise UserError(
            f"{PARAMS_FILE}: expected a mapping of settings at the top level (profile, datasets, "
            "partitions, runs); the file is empty or holds something else"
        )
    params = expand_templates(params)
    problems = check_params(params)
    if problems:  # validated before anything is written: a bad params.yaml changes no file
        raise UserError("\n".join(problems))
    grid = derive_grid(params)
    if args.profile:
        write_text(PARAMS_FILE, text)
    write_text(GRID_FILE, GRID_HEADER + yaml.safe_dump({"grid": grid}, sort_keys=True))
    print(
        f"profile {grid['profile']}: {len(grid['datasets'])} datasets, {len(grid['partitions'])} partitions, "
        f"{len(grid['runs'])} runs -> {GRID_FILE}"
    )


if __name__ == "__main__":
    main()
