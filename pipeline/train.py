"""Train stage: one run key -> reports/runs/<key>/ (metrics, curves, settings) + data/models/<key>.pt.

    python -m pipeline.train KEY [--path auto|vectorized|sequential]

Per round it logs (DVCLive) the global model's test accuracy and loss, the cohort's mean local
training loss and the bytes sent down and up; the seconds per round go to timing.json, apart, so that
the metrics and curves of two identical runs are byte-identical. A NaN/inf loss stops the run with
status `diverged` (shown as NC in the reports), and the stage still succeeds so the pipeline goes on.
Every `checkpoint_every` rounds the full state is saved under .checkpoints/, keyed by the hash of the
resolved settings: a killed run resumes from there, and a changed setting never does.
"""
from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import torch
from tqdm import tqdm

from pipeline.algorithms import get_algorithm
from pipeline.config import load_checked_params
from pipeline.datasets import dataset_spec, load_prepared, prepared_path
from pipeline.engine import (ClientData, channel_stats, evaluate, prefer_vectorized, rounds_to_accuracy, run_round,
                             tune_allocator)
from pipeline.errors import UserError, exit_on_user_error
from pipeline.io import atomic_path, sha256_file, write_json
from pipeline.models import build_model
from pipeline.partition import load_partition
from pipeline.runs import resolve_run, settings_hash

RUNS_DIR = Path("reports/runs")
MODELS_DIR = Path("data/models")
CHECKPOINT_DIR = Path(os.environ.get("FEDFORGET_CHECKPOINTS", ".checkpoints"))
CURVES = ("test_accuracy", "test_loss", "train_loss", "bytes_down", "bytes_up")


def load_client_data(settings: dict, params: dict, device: torch.device) -> tuple[ClientData, torch.Tensor, str]:
    dataset = settings["dataset"]
    arrays = load_prepared(dataset, (params.get("datasets") or {}).get(dataset))
    dataset_sha = sha256_file(prepared_path(dataset))
    partition = load_partition(settings["partition"], dataset_sha)
    x = torch.from_numpy(arrays["x_train"]).to(device)
    mean, std = channel_stats(x)
    clients = [torch.from_numpy(p).to(device) for p in partition["train"]]
    data = ClientData(x, torch.from_numpy(arrays["y_train"]).to(device), clients, mean, std)
    test = ClientData(torch.from_numpy(arrays["x_test"]).to(device), torch.from_numpy(arrays["y_test"]).to(device),
                      [], mean, std)
    return data, test, dataset_sha


def code_digest() -> str:
    """The training code's own hash: a checkpoint written by other code (a fixed bug, say) is stale too."""
    import hashlib

    package = Path(__file__).resolve().parent
    files = [package / name for name in ("train.py", "engine.py", "cohort_mlp.py", "fisher.py", "models.py", "runs.py",
                                         "datasets.py", "partition.py")]
    files += sorted((package / "algorithms").glob("*.py"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def checkpoint_path(key: str, digest: str) -> Path:
    return CHECKPOINT_DIR / f"{key}-{digest}.pt"


def save_checkpoint(key: str, digest: str, payload: dict) -> None:
    path = checkpoint_path(key, digest)
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    for stale in CHECKPOINT_DIR.glob(f"{key}-*.pt"):
        if stale != path:
            stale.unlink(missing_ok=True)


def load_checkpoint(key: str, digest: str, device: torch.device) -> dict | None:
    path = checkpoint_path(key, digest)
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, weights_only=False, map_location=device)
    except Exception:  # a checkpoint cut short by a crash is worth nothing: start over
        return None
    return payload if payload.get("digest") == digest else None


def summarize(settings: dict, history: list[dict], status: str) -> dict:
    evaluated = [h for h in history if h.get("test_accuracy") is not None]
    rounds = [h["round"] for h in evaluated]
    accuracies = [h["test_accuracy"] for h in evaluated]
    summary = {
        "status": status,
        "diverged": int(status == "diverged"),
        "rounds_completed": len(history),
        "final_accuracy": accuracies[-1] if accuracies else None,
        "best_accuracy": max(accuracies) if accuracies else None,
        "bytes_down_total": sum(h["bytes_down"] for h in history),
        "bytes_up_total": sum(h["bytes_up"] for h in history),
    }
    reached = {}
    for target in settings["targets"]:
        found = rounds_to_accuracy(rounds, accuracies, target)
        if found is not None:
            reached[f"{target:g}"] = found
    summary["rounds_to_accuracy"] = reached
    return summary


def write_outputs(key: str, settings: dict, history: list[dict], status: str, seconds: list[float],
                  final_params: dict) -> dict:
    """All of a run's outputs, from its history (so a resumed run writes exactly what a whole one would)."""
    from dvclive import Live

    out_dir = RUNS_DIR / key
    tmp_dir = out_dir.with_name(f".{key}.tmp")
    shutil.rmtree(tmp_dir, ignore_errors=True)
    with Live(dir=str(tmp_dir), dvcyaml=False, save_dvc_exp=False, report=None) as live:
        for record in history:
            live.step = record["round"]
            for name in CURVES:
                if record.get(name) is not None:
                    live.log_metric(name, record[name])
        summary = summarize(settings, history, status)
        live.summary = {**summary, "step": history[-1]["round"] if history else 0}
    write_json(tmp_dir / "settings.json", settings)
    write_json(tmp_dir / "timing.json", {"seconds_total": round(sum(seconds), 3),
                                         "seconds_per_round": [round(s, 4) for s in seconds]})
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp_dir, out_dir)
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    with atomic_path(MODELS_DIR / f"{key}.pt") as tmp:
        torch.save(final_params, tmp)
    return summary


def train_run(params: dict, key: str, vectorized: bool | None = None, progress: bool = True) -> dict:
    """Train one run (resuming from its checkpoint if there is one) and write its outputs.

    vectorized=None picks the faster path for the model and device (engine.prefer_vectorized)."""
    settings = resolve_run(params, key)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data, test, dataset_sha = load_client_data(settings, params, device)
    spec = dataset_spec(settings["dataset"])
    model = build_model(settings["model"], spec.image_shape, spec.classes, settings["seed"]).to(device)
    algorithm = get_algorithm(settings["algorithm"]["name"])
    hp = settings["algorithm"]
    if vectorized is None:
        vectorized = prefer_vectorized(model, device)
    digest = settings_hash(settings, {"dataset_sha256": dataset_sha, "vectorized": vectorized, "code": code_digest(),
                                      "device": device.type,
                                      "partition": load_partition(settings["partition"])["meta"]["clients_sha256"]})
    checkpoint = load_checkpoint(key, digest, device)
    if checkpoint:
        state, history, seconds = checkpoint["state"], checkpoint["history"], checkpoint["seconds"]
        print(f"{key}: resuming after round {len(history)} from {checkpoint_path(key, digest)}", flush=True)
    else:
        initial = {name: value.detach().clone() for name, value in model.named_parameters()}
        state, history, seconds = algorithm.init_state(initial, len(data.clients), hp), [], []
    status = "diverged" if history and history[-1].get("diverged") else "ok"
    test_index = torch.arange(len(test.y))
    bar = tqdm(total=settings["rounds"], initial=len(history), desc=key, disable=not progress,
               unit="round", dynamic_ncols=True)
    for round_ in range(len(history) + 1, settings["rounds"] + 1):
        if status == "diverged":
            break
        start = time.perf_counter()
        result = run_round(model, algorithm, hp, state, data, settings, round_, vectorized=vectorized)
        record = {"round": round_, "train_loss": result.train_loss, "bytes_down": result.bytes_down,
                  "bytes_up": result.bytes_up, "test_accuracy": None, "test_loss": None}
        if result.diverged:
            status = "diverged"
            record["diverged"] = True
            record["train_loss"] = None
        else:
            state = result.state
            if round_ % settings["eval_every"] == 0 or round_ == settings["rounds"]:
                record["test_accuracy"], record["test_loss"] = evaluate(model, state["params"], test, test_index)
        history.append(record)
        seconds.append(time.perf_counter() - start)
        bar.update(1)
        if record["test_accuracy"] is not None:
            bar.set_postfix(acc=f"{record['test_accuracy']:.4f}")
        if round_ % settings["checkpoint_every"] == 0 or status == "diverged":
            save_checkpoint(key, digest, {"digest": digest, "state": state, "history": history, "seconds": seconds})
    bar.close()
    params_cpu = {name: value.detach().cpu() for name, value in state["params"].items()}
    return write_outputs(key, settings, history, status, seconds, params_cpu)


@exit_on_user_error
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("key", help="a key of `runs` in params.yaml")
    parser.add_argument("--path", choices=("auto", "vectorized", "sequential"), default="auto",
                        help="how a cohort is trained: auto picks the faster for the model and device")
    args = parser.parse_args(argv)
    params = load_checked_params()
    if args.key not in (params.get("runs") or {}):
        raise UserError(f"runs.{args.key}: no such run; defined: {', '.join(params.get('runs') or {})}")
    threads = os.environ.get("FEDFORGET_THREADS", str(torch.get_num_threads()))
    if not threads.isdigit() or int(threads) < 1:
        raise UserError(f"FEDFORGET_THREADS: {threads!r} is not allowed; expected an integer >= 1")
    torch.set_num_threads(int(threads))
    tune_allocator()
    vectorized = {"auto": None, "vectorized": True, "sequential": False}[args.path]
    summary = train_run(params, args.key, vectorized=vectorized, progress=not os.environ.get("CI"))
    print(f"{args.key}: {summary['status']}, final accuracy {summary['final_accuracy']}, "
          f"rounds to target {summary['rounds_to_accuracy']}")


if __name__ == "__main__":
    main()
