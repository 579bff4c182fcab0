"""List every run of a profile with its resolved settings, before spending compute on it.

    python -m pipeline.plan                  # the active profile, one line per run
    python -m pipeline.plan --profile paper  # the paper profile, without switching to it
    python -m pipeline.plan --verbose        # every resolved setting, and what the default profile scaled
"""
from __future__ import annotations

import argparse
import signal

from pipeline.config import PROFILES, derive_grid, load_checked_params
from pipeline.errors import exit_on_user_error
from pipeline.runs import resolve_run


def algorithm_text(algorithm: dict) -> str:
    extra = ", ".join(f"{k}={v}" for k, v in algorithm.items() if k != "name")
    return f"{algorithm['name']}({extra})" if extra else algorithm["name"]


def run_line(settings: dict) -> str:
    return (f"{settings['key']:<32} {algorithm_text(settings['algorithm']):<48} {settings['partition']:<26} "
            f"{settings['model']:<10} R={settings['rounds']:<4} C={settings['client_fraction']:<4} "
            f"E={settings['local_epochs']:<3} B={settings['batch_size']:<4} lr={settings['lr']:g} "
            f"{settings['optimizer']} momentum={settings['momentum']:g} wd={settings['weight_decay']:g} "
            f"loss={settings['loss']} seeds={settings['seeds']}")


@exit_on_user_error
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILES, help="the profile to list (default: the active one)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    params = load_checked_params(grid_path=None)
    if args.profile:
        params = {**params, "profile": args.profile}
    grid = derive_grid(params)
    print(f"profile {params['profile']}: {len(grid['run_ids'])} runs "
          f"({len(grid['runs'])} run-seed stages), {len(grid['partitions'])} partitions, "
          f"datasets {', '.join(grid['datasets'])}")
    for key in grid["run_ids"]:
        settings = resolve_run(params, key)
        print(run_line(settings))
        if args.verbose:
            for name, value in sorted(settings.items()):
                if name not in ("key", "scaled"):
                    print(f"    {name}: {value}")
            for name, change in sorted(settings["scaled"].items()):
                print(f"    scaled {name}: paper {change['paper']} -> {change['used']}")


if __name__ == "__main__":
    main()
