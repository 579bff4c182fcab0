"""Engine rounds on synthetic data in a process of their own, for the tests that need one: a run killed
after a checkpoint and resumed (tests/e2e/test_device.py, tests/gpu/test_gpu.py), and a cohort split over
processes by torchrun (the ranks gather their clients onto the server state's device).

    python tests/support/round_driver.py OUT --device cpu|cuda --rounds R [--checkpoint FILE] [--hang-after K]
           [--algorithm NAME] [--model NAME] [--path vectorized|sequential]
    python -m torch.distributed.run --nproc-per-node 2 tests/support/round_driver.py OUT ...   # the same, 2 ranks

It needs no prepared dataset and no DVC (the GPU machine has neither): the data are tests/support/synthetic's.
The runtime options are read from the environment once (pipeline.options.RuntimeOptions, as a train stage
reads them: FEDFORGET_DEVICE, which --device sets where the environment does not, _DETERMINISTIC,
_DIST_BACKEND, _DIST_TIMEOUT, and the speed levers _CHUNK, _COMPILE, _FOREACH) and passed down.
After every round the state goes to --checkpoint (if given); with --hang-after K the process prints
"checkpointed K" and waits to be killed once round K is saved; a rerun resumes after the checkpoint's
round. Rank 0 writes the final state (on the CPU) to OUT.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pipeline import distributed  # noqa: E402
from pipeline.algorithms import get_algorithm, resolve_hyperparams  # noqa: E402
from pipeline.clientdata import ClientData  # noqa: E402
from pipeline.cohort import Levers  # noqa: E402
from pipeline.models import build_model  # noqa: E402
from pipeline.options import DEVICE, RuntimeOptions  # noqa: E402
from pipeline.rounds import initial_state, run_round  # noqa: E402
from support.synthetic import make_data, run_settings  # noqa: E402

SIZES = [5, 9, 14, 3, 7, 6]
SHAPE = (8, 8, 1)


def on(data: ClientData, device: torch.device) -> ClientData:
    return ClientData(
        data.x.to(device),
        data.y.to(device),
        [c.to(device) for c in data.clients],
        data.mean.to(device),
        data.std.to(device),
        classes=data.classes,
    )


def save(obj, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)  # a kill never leaves half a checkpoint


def to_cpu(tree):
    if isinstance(tree, dict):
        return {k: to_cpu(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(to_cpu(v) for v in tree)
    return tree.detach().cpu() if torch.is_tensor(tree) else tree


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--hang-after", type=int)
    parser.add_argument("--algorithm", default="scaffold")
    parser.add_argument("--model", default="mlp_200")
    parser.add_argument("--path", choices=("vectorized", "sequential"), default="sequential")
    args = parser.parse_args(argv)
    options = RuntimeOptions.from_environment({DEVICE: args.device, **os.environ})  # the environment's wins
    levers = Levers(options.chunk, options.compile, options.foreach == "on")
    torch.set_num_threads(1)
    ranks = distributed.start(options)
    device = distributed.device_for(ranks, options.device)
    try:
        data = on(make_data(SIZES, shape=SHAPE, classes=3, seed=2), device)
        model = build_model(args.model, SHAPE, 3, 0).to(device)
        algorithm = get_algorithm(args.algorithm)
        hp = resolve_hyperparams({"name": args.algorithm})
        settings = run_settings(5, optimizer="adam", lr=0.01, client_fraction=1.0, local_epochs=2, batch_size=4)
        state, first = initial_state(model, algorithm, len(SIZES), hp), 1
        if args.checkpoint is not None and args.checkpoint.is_file():
            saved = torch.load(args.checkpoint, weights_only=False, map_location=device)
            state, first = saved["state"], saved["round"] + 1
        for round_ in range(first, args.rounds + 1):
            state = run_round(
                model,
                algorithm,
                hp,
                state,
                data,
                settings,
                round_,
                vectorized=args.path == "vectorized",
                ranks=ranks,
                levers=levers,
            ).state
            if args.checkpoint is not None and (ranks is None or ranks.is_main):
                save({"round": round_, "state": to_cpu(state)}, args.checkpoint)
            if args.hang_after == round_:
                print(f"checkpointed {round_}", flush=True)
                while True:
                    time.sleep(1)
        if ranks is None or ranks.is_main:
            save(to_cpu(state), args.out)
    finally:
        distributed.stop(ranks)


if __name__ == "__main__":
    main()
