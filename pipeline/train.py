"""Train stage: one (run, seed) -> reports/runs/<run>/seed<s>/ (metrics, curves, settings, forgetting
probes) + data/models/<run>-seed<s>.pt.

    python -m pipeline.train RUN --seed S [--path auto|vectorized|sequential]
    torchrun --nproc-per-node N -m pipeline.train RUN --seed S     # the cohort split over N processes
    FEDFORGET_TORCHRUN="--nproc-per-node N" python -m pipeline.train RUN --seed S   # the same (pipeline.distributed)

The run's settings come from resolved/<run>.json (the resolve stage), not from params.yaml, so that a
stage reruns only when its own run's settings change. They are read once into a `RunSettings`
(pipeline.settings), and each layer gets only its part: the data loader the data settings, a round the
round settings (rounds.run_round), the probes theirs.

Per round it logs (DVCLive) the global model's test accuracy and loss (with `evaluate_on: validation`,
the TCE paper's, on the union of the clients' validation sets, and the test set too at the last
TEST_SET_EVALUATIONS evaluated rounds: `test_set_accuracy`, whose mean over them is the summary's
`test_set_accuracy_mean`, and the last model's as `final_test_accuracy`), the cohort's mean local
training loss, the bytes sent down and up, and what the algorithm's aggregation logs (`aggregation_<name>`:
Importance's weight spread); the seconds per round go to timing.json, apart, so that
the metrics and curves of two identical runs are byte-identical. A NaN/inf loss stops the run with
status `diverged` (shown as NC in the reports), and the stage still succeeds so the pipeline goes on.
Every `checkpoint_every` rounds the full state is saved under .checkpoints/, keyed by the hash of the
resolved settings: a killed run resumes from there, and a changed setting never does.

Forgetting probes (pipeline.forgetting), at the rounds the run lists: local client forgetting (F_ki,
F_k) of up to `probe_clients` cohort clients and the global model's accuracy on every client's held-out
data (`probe_rounds`), and forgettable examples per cohort client every `forgettable_every` rounds.
They go to the run's forgetting/ folder; their cost is timed apart (timing.json). With `example_events`,
every local presentation of a training example is scored (the training forward pass, before its step)
and example-forgetting events are counted (Toneva et al.): per round as a curve, and in the metrics the
totals with the unforgettable and never-learned examples. A run with one client holding all data
(partition `iid`, `clients: 1`, C = 1) is the centralised reference of FedWAvg's Table 1.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm import tqdm

from pipeline import distributed, forgetting
from pipeline.algorithms import get_algorithm
from pipeline.checks import read_grid, run_seed_problems
from pipeline.clientdata import ClientData, cached_scaling_stats, cohort_size
from pipeline.cohort import chunk_rule, compile_mode, prefer_vectorized, tune_allocator
from pipeline.errors import UserError, exit_on_user_error
from pipeline.fingerprint import run_code_digest
from pipeline.inputs import dataset_spec, load_partition, load_prepared_with_sha256, read_resolved, settings_hash
from pipeline.io import atomic_path, write_json
from pipeline.metrics import evaluate, rounds_to_accuracy
from pipeline.models import build_model
from pipeline.optimizers import foreach_mode
from pipeline.rounds import initial_state, probe_positions, run_round
from pipeline.settings import DataSettings, ProbeSettings, RunSettings

RUNS_DIR = Path("reports/runs")
MODELS_DIR = Path("data/models")
CHECKPOINT_DIR = Path(os.environ.get("FEDFORGET_CHECKPOINTS", ".checkpoints"))
CURVES = ("test_accuracy", "test_loss", "train_loss", "bytes_down", "bytes_up", "example_forgetting_events",
          "test_set_accuracy")
# With `evaluate_on: validation` the test set is evaluated at this many last evaluated rounds, so that the
# accuracy the claims read is a mean over rounds like every other run's (report.seeds.K_LAST), not the
# last model's alone (a seed sd of 0.036 against 0.008 for a last-5 mean; issue 37).
TEST_SET_EVALUATIONS = 5
# The curves an algorithm's aggregation logs (its state's "round_log") are named with this prefix.
AGGREGATION_LOG_PREFIX = "aggregation_"


def load_client_data(settings: DataSettings, device: torch.device) -> tuple[ClientData, ClientData, str]:
    arrays, dataset_sha = load_prepared_with_sha256(settings.dataset, settings.dataset_options)
    partition = load_partition(settings.partition, dataset_sha)
    x = torch.from_numpy(arrays["x_train"]).to(device)
    mean, std = cached_scaling_stats(x, settings.input_scaling, dataset_sha)
    classes = dataset_spec(settings.dataset).classes
    clients = [torch.from_numpy(p).to(device) for p in partition["train"]]
    val_clients = [torch.from_numpy(p).to(device) for p in partition["val"]]
    data = ClientData(x, torch.from_numpy(arrays["y_train"]).to(device), clients, mean, std, val_clients, classes)
    test = ClientData(torch.from_numpy(arrays["x_test"]).to(device), torch.from_numpy(arrays["y_test"]).to(device),
                      [], mean, std, [], classes)
    return data, test, dataset_sha


def checkpoint_path(key: str, digest: str) -> Path:
    return CHECKPOINT_DIR / f"{key}-{digest}.pt"


def save_checkpoint(key: str, digest: str, payload: dict) -> None:
    path = checkpoint_path(key, digest)
    save_torch(payload, path)
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


def summarize(targets: Sequence[float], history: list[dict], status: str,
              final_test_accuracy: float | None = None) -> dict:
    """The run's headline metrics, with the first round each of `targets` (accuracies) was reached.
    `final_test_accuracy`: the last model on the test set when the curves were evaluated on validation
    data (the TCE paper's Table 1 number)."""
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
    for target in targets:
        found = rounds_to_accuracy(rounds, accuracies, target)
        if found is not None:
            reached[f"{target:g}"] = found
    summary["rounds_to_accuracy"] = reached
    if final_test_accuracy is not None:
        summary["final_test_accuracy"] = final_test_accuracy
    on_test_set = [h["test_set_accuracy"] for h in history if h.get("test_set_accuracy") is not None]
    if on_test_set:
        summary["test_set_accuracy_mean"] = sum(on_test_set) / len(on_test_set)
    return summary


def forgetting_summary(probes: dict) -> dict:
    """The probes' headline numbers, for `dvc metrics diff`: mean F_k per probed round, the worst
    client's accuracy under the global model at the last probe, and all forgettable examples counted."""
    summary = {}
    rounds = probes.get("rounds", {})
    if rounds:
        summary["mean_local_forgetting"] = {f"round_{r}": round(float(torch.nanmean(torch.as_tensor(rec["F"]))), 6)
                                            for r, rec in sorted(rounds.items()) if len(rec["clients"]) > 1}
        last = rounds[max(rounds)]["global_accuracy_spread"]
        summary["worst_client_accuracy"] = round(float(last["min"]), 6)
        summary["client_accuracy_sd"] = round(float(last["sd"]), 6)
    if probes.get("forgettable"):
        summary["forgettable_total"] = int(sum(sum(c.values()) for c in probes["forgettable"].values()))
    if probes.get("presentations"):
        summary["example_events"] = probes["presentations"]
    return summary


def log_probe_curves(live, probes: dict) -> None:
    """The probes as DVCLive curves (`dvc plots diff` compares them across commits): the cohort's
    forgettable examples (total and its worst client) every `forgettable_every` rounds, and the mean F_k
    and the worst client's global accuracy at each probe round. Per-client curves: forgetting/."""
    for round_, per_client in sorted(probes.get("forgettable", {}).items()):
        live.step = round_
        live.log_metric("forgettable/cohort_total", int(sum(per_client.values())))
        live.log_metric("forgettable/client_max", int(max(per_client.values())))
    for round_, record in sorted(probes.get("rounds", {}).items()):
        live.step = round_
        if len(record["clients"]) > 1:
            live.log_metric("forgetting/mean_local_forgetting", float(torch.nanmean(torch.as_tensor(record["F"]))))
        live.log_metric("forgetting/worst_client_accuracy", float(record["global_accuracy_spread"]["min"]))


def aggregation_record(log: dict) -> dict:
    """The aggregation's round_log (0-d tensors) as the record's curves: one read-back for all of them."""
    if not log:
        return {}
    values = torch.stack([value.to(torch.float64) for value in log.values()]).tolist()
    return {AGGREGATION_LOG_PREFIX + name: value for name, value in zip(log, values)}


def aggregation_curves(record: dict) -> list[str]:
    """The names an algorithm's aggregation logged in this round's record (its "round_log"), in order."""
    return [name for name in record if name.startswith(AGGREGATION_LOG_PREFIX)]


def run_dir(run: str, seed: int) -> Path:
    return RUNS_DIR / run / f"seed{seed}"


def write_outputs(settings: RunSettings, history: list[dict], status: str, seconds: list[float],
                  probe_seconds: list[float], probes: dict, final_state: dict,
                  final_test_accuracy: float | None = None) -> dict:
    """All of a run's outputs, from its history (so a resumed run writes exactly what a whole one would)."""
    from dvclive import Live

    key = settings.key
    out_dir = run_dir(settings.run, settings.seed)
    tmp_dir = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp_dir, ignore_errors=True)
    with Live(dir=str(tmp_dir), dvcyaml=False, save_dvc_exp=False, report=None) as live:
        for record in history:
            live.step = record["round"]
            for name in (*CURVES, *aggregation_curves(record)):
                if record.get(name) is not None:
                    live.log_metric(name, record[name])
        log_probe_curves(live, probes)
        summary = {**summarize(settings.schedule.targets, history, status, final_test_accuracy),
                   **forgetting_summary(probes)}
        live.summary = {**summary, "step": history[-1]["round"] if history else 0}
    write_json(tmp_dir / "settings.json", settings.record)
    write_json(tmp_dir / "timing.json", timing(seconds, probe_seconds))
    write_probes(tmp_dir / "forgetting", key, probes)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp_dir, out_dir)
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    save_torch(final_state, MODELS_DIR / f"{key}.pt")
    remove_checkpoints(key)
    return summary


def remove_checkpoints(key: str) -> None:
    """A finished run's checkpoints: of no more use (its results are written), and left in place they
    would make `dvc repro -f` resume at the last round rather than retrain."""
    for path in CHECKPOINT_DIR.glob(f"{key}-*.pt"):
        path.unlink(missing_ok=True)


def machine_kind(device: torch.device) -> str:
    """The processor a checkpoint was written on, part of its key: another CPU kind (AVX-512 or not) or GPU
    can round differently, so a run resumed there would mix two machines' numbers."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        avx512 = " avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: the model name alone
        avx512 = False
    return distributed.cpu_model() + (" avx512f" if avx512 else "")


def save_torch(obj, path: Path) -> None:
    """torch.save, atomically, through an open file: given a path, torch names the archive's folder after
    the file, here the temporary one with its random suffix, so the same tensors gave different bytes (and
    a new DVC hash for a model) on every run; through a file object the folder is always `archive`."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save(obj, handle)


def timing(seconds: list[float], probe_seconds: list[float]) -> dict:
    """Seconds per round (probes included) and the probes' own share, so their cost can be stated; and
    the device they were measured on (rank 0's: its name, software versions, precision and determinism
    flags), since seconds and, on a GPU, the last bits of the numbers depend on it."""
    probed = [(s, p) for s, p in zip(seconds, probe_seconds) if p > 0]
    return {"seconds_total": round(sum(seconds), 3), "seconds_per_round": [round(s, 4) for s in seconds],
            "probe_seconds_total": round(sum(probe_seconds), 3),
            "probe_fraction_of_probed_rounds": (round(sum(p for _, p in probed) / sum(s - p for s, p in probed), 4)
                                                if probed else None),
            "device": distributed.describe_device(distributed.device_for(None))}


def write_probes(folder: Path, key: str, probes: dict) -> None:
    """forgetting/round_<t>.json and .png per probed round; forgettable.tsv and .png over rounds, the
    figures titled with the (run, seed)'s `key`."""
    folder.mkdir(parents=True, exist_ok=True)
    held_out = "validation split" if probes.get("has_validation") else "training samples (no validation split)"
    for round_, record in sorted(probes.get("rounds", {}).items()):
        forgetting.write_probe(folder / f"round_{round_}.json", {**record, "held_out": held_out})
        forgetting.plot_forgetting_heatmaps(folder / f"round_{round_}.png", record,
                                            f"{key}: local client forgetting, round {round_}")
    counts = probes.get("forgettable", {})
    if counts:
        lines = ["round\tclient\tforgettable"]
        lines += [f"{r}\t{c}\t{n}" for r, per_client in sorted(counts.items()) for c, n in sorted(per_client.items())]
        (folder / "forgettable.tsv").write_text("\n".join(lines) + "\n")
        rounds = sorted(counts)
        clients = sorted({c for per_client in counts.values() for c in per_client})
        forgetting.plot_forgettable_curves(folder / "forgettable.png", rounds,
                                           {c: [counts[r].get(c) for r in rounds] for c in clients},
                                           f"{key}: forgettable examples per client")


def probe_round(view, round_: int, settings: ProbeSettings, seed: int, probes: dict, num_clients: int) -> None:
    """Record a probed round's forgetting measurements into `probes` (`seed`: the run's, which picks the
    clients followed when the cohort is larger than `settings.clients`)."""
    if round_ in settings.rounds:
        positions = probe_positions(view.cohort, num_clients, settings.clients, seed)
        record = view.local_forgetting(positions)
        per_client = view.global_accuracy_per_client()
        probes.setdefault("rounds", {})[round_] = {
            "round": round_, **record, "global_accuracy_per_client": per_client,
            "global_accuracy_spread": forgetting.accuracy_spread(per_client)}
    if settings.forgettable_every and round_ % settings.forgettable_every == 0:
        probes.setdefault("forgettable", {})[round_] = dict(zip(view.cohort, view.forgettable.tolist()))


def is_probed(settings: ProbeSettings, round_: int) -> bool:
    every = settings.forgettable_every
    return round_ in settings.rounds or bool(every and round_ % every == 0)


def curve_set(evaluate_on: str, data, test) -> tuple:
    """The data the accuracy curves are evaluated on (`evaluate_on`): the whole test set; the union of the
    clients' validation sets (TCE); or the test samples of the classes some client trains on
    (`test_seen_classes`: FedWAvg's cluster partitions hold 4 or 6 of CIFAR-10's classes, and its
    accuracies, up to 92 %, are on those)."""
    if evaluate_on == "validation":
        return data, data.validation_index()
    everything = torch.arange(len(test.y), device=test.y.device)
    if evaluate_on == "test_seen_classes":
        seen = torch.unique(data.y[torch.cat(list(data.clients))]).to(test.y.device)
        return test, everything[torch.isin(test.y, seen)]
    return test, everything


def rounds_also_on_the_test_set(schedule, evaluations: int = TEST_SET_EVALUATIONS) -> frozenset[int]:
    """The last `evaluations` rounds at which the curves are evaluated (every `eval_every` rounds and the
    last): where a run monitored on validation data is also evaluated on the test set."""
    evaluated = [r for r in range(1, schedule.rounds + 1) if r % schedule.eval_every == 0 or r == schedule.rounds]
    return frozenset(evaluated[-evaluations:])


def train_run(settings: RunSettings, vectorized: bool | None = None, progress: bool = True,
              ranks: distributed.Ranks | None = None) -> dict | None:
    """Train one (run, seed) (resuming from its checkpoint if there is one) and write its outputs.

    vectorized=None picks the faster path for the model and device (cohort.prefer_vectorized). With
    `ranks` (torchrun), this process trains its block of each cohort (pipeline.distributed); rank 0 alone
    evaluates, probes, checkpoints and writes, and returns the summary (the other ranks return None)."""
    key, schedule, hp = settings.key, settings.schedule, settings.algorithm
    main_rank = ranks is None or ranks.is_main
    device = distributed.device_for(ranks)
    data, test, dataset_sha = load_client_data(settings.data, device)
    spec = dataset_spec(settings.data.dataset)
    model = build_model(settings.model.name, spec.image_shape, spec.classes, settings.seed,
                        settings.model.norm).to(device)
    algorithm = get_algorithm(hp["name"])
    if vectorized is None:
        vectorized = prefer_vectorized(model, device, cohort_size(len(data.clients), settings.round.client_fraction))
    digest = settings_hash(settings.record, {
        "dataset_sha256": dataset_sha, "vectorized": vectorized, "code": run_code_digest(hp["name"]),
        "device": device.type, "machine": machine_kind(device), "torch": torch.__version__,
        "partition": load_partition(settings.data.partition)["meta"]["clients_sha256"]})
    # Rank 0 reads the checkpoint and sends it: the ranks of a multi-node run need not share a disk.
    checkpoint = distributed.broadcast_from_main(ranks, load_checkpoint(key, digest, device) if main_rank else None,
                                                 device, "reading the checkpoint")
    if checkpoint:
        state, history, seconds = checkpoint["state"], checkpoint["history"], checkpoint["seconds"]
        probe_seconds, probes = checkpoint["probe_seconds"], checkpoint["probes"]
        if main_rank:
            print(f"{key}: resuming after round {len(history)} from {checkpoint_path(key, digest)}", flush=True)
    else:
        state, history, seconds = initial_state(model, algorithm, len(data.clients), hp), [], []
        probe_seconds, probes = [], {"has_validation": data.has_validation()}
    status = "diverged" if history and history[-1].get("diverged") else "ok"
    # The curves' evaluation set: the test set, or (TCE) the union of the clients' validation sets.
    on_validation = schedule.evaluate_on == "validation"
    curve_data, curve_index = curve_set(schedule.evaluate_on, data, test)
    also_on_test = rounds_also_on_the_test_set(schedule) if on_validation else frozenset()
    test_data, test_index = curve_set("test", data, test)
    bar = tqdm(total=schedule.rounds, initial=len(history), desc=key, disable=not (progress and main_rank),
               unit="round", dynamic_ncols=True)
    for round_ in range(len(history) + 1, schedule.rounds + 1):
        if status == "diverged":
            break
        start = time.perf_counter()
        result = run_round(model, algorithm, hp, state, data, settings.round, round_, vectorized=vectorized,
                           probe=main_rank and is_probed(settings.probes, round_), ranks=ranks)
        record = {"round": round_, "train_loss": result.train_loss, "bytes_down": result.bytes_down,
                  "bytes_up": result.bytes_up, "test_accuracy": None, "test_loss": None,
                  "example_forgetting_events": result.example_events}
        if result.diverged:
            status = "diverged"
            record["diverged"] = True
            record["train_loss"] = None
        else:
            state = result.state
            record.update(aggregation_record(result.aggregation_log))
            if main_rank and (round_ % schedule.eval_every == 0 or round_ == schedule.rounds):
                record["test_accuracy"], record["test_loss"] = evaluate(model, {**state["params"], **state["buffers"]},
                                                                        curve_data, curve_index)
                if round_ in also_on_test:
                    record["test_set_accuracy"] = evaluate(model, {**state["params"], **state["buffers"]},
                                                           test_data, test_index)[0]
        probe_start = time.perf_counter()
        if result.view is not None:
            probe_round(result.view, round_, settings.probes, settings.seed, probes, len(data.clients))
        probe_seconds.append(time.perf_counter() - probe_start if result.view is not None else 0.0)
        history.append(record)
        seconds.append(time.perf_counter() - start)
        bar.update(1)
        if record["test_accuracy"] is not None:
            bar.set_postfix(acc=f"{record['test_accuracy']:.4f}")
        if round_ % schedule.checkpoint_every == 0 or status == "diverged":
            distributed.check_agreement(ranks, state, round_, device)
        if main_rank and (round_ % schedule.checkpoint_every == 0 or status == "diverged"):
            save_checkpoint(key, digest, {"digest": digest, "state": state, "history": history, "seconds": seconds,
                                          "probe_seconds": probe_seconds, "probes": probes})
    bar.close()
    if not main_rank:
        return None
    final = {name: value.detach().cpu() for name, value in {**state["params"], **state["buffers"]}.items()}
    final_test_accuracy = None
    if on_validation and status == "ok":  # the TCE paper reports the last model on the test set
        # The last round is always among rounds_also_on_the_test_set: its record holds that evaluation.
        final_test_accuracy = history[-1]["test_set_accuracy"]
    if settings.round.example_events:
        probes["presentations"] = {"clients": len(data.clients),
                                   **forgetting.presentation_summary(state.get("presentations", {}))}
    return write_outputs(settings, history, status, seconds, probe_seconds, probes, final, final_test_accuracy)


@exit_on_user_error
def main(argv=None) -> None:
    try:
        train_command(argv)
    except distributed.PeerLost:
        if os.environ.get(distributed.QUIET_PEERS_VARIABLE):  # the launcher names the rank that failed
            sys.exit(distributed.PEER_LOST_EXIT)
        raise
    except UserError:
        if distributed.quiet_worker():  # rank 0 says it, once
            sys.exit(distributed.USER_ERROR_EXIT)
        raise


def checked_speed_settings() -> int:
    """The environment's speed settings, each refused in one line before anything is read (a bad
    FEDFORGET_CHUNK on every device, not only where it would apply); returns the thread count."""
    threads = os.environ.get("FEDFORGET_THREADS", str(torch.get_num_threads()))
    if not threads.isdigit() or int(threads) < 1:
        raise UserError(f"FEDFORGET_THREADS: {threads!r} is not allowed; expected an integer >= 1")
    chunk_rule()
    compile_mode()
    foreach_mode()
    return int(threads)


def train_command(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a key of `runs` in params.yaml")
    parser.add_argument("--seed", type=int, required=True, help="one of the run's seeds")
    parser.add_argument("--path", choices=("auto", "vectorized", "sequential"), default="auto",
                        help="how a cohort is trained: auto picks the faster for the model and device")
    args = parser.parse_args(argv)
    threads = checked_speed_settings()
    problems = run_seed_problems(args.run, args.seed, read_grid())  # a pair no train stage has: refused
    if problems:
        raise UserError("\n".join(problems))
    settings = RunSettings.from_resolved(read_resolved(args.run), args.seed)
    per_round = cohort_size(len(load_partition(settings.data.partition)["train"]), settings.round.client_fraction)
    launch = os.environ.get(distributed.LAUNCH_VARIABLE, "").strip()
    if launch and not distributed.inside_torchrun():
        launch = distributed.fit_launch(launch, per_round, settings.run)
        if launch is not None:
            distributed.relaunch_under_torchrun(launch, sys.argv[1:] if argv is None else list(argv))
            return
    torch.set_num_threads(threads)
    tune_allocator()
    vectorized = {"auto": None, "vectorized": True, "sequential": False}[args.path]
    ranks = distributed.start()
    try:
        distributed.check_cohort_size(ranks, per_round, settings.run)
        summary = train_run(settings, vectorized=vectorized, progress=not os.environ.get("CI"), ranks=ranks)
    finally:
        distributed.stop(ranks)
    if summary is not None:
        print(f"{settings.key}: {summary['status']}, final accuracy {summary['final_accuracy']}, "
              f"rounds to target {summary['rounds_to_accuracy']}")


if __name__ == "__main__":
    main()
