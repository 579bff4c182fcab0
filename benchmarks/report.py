"""The benchmark's targets (pass or miss, never hidden) and its markdown report, from the results dict."""

from __future__ import annotations

FLOPS_NOTE = (
    "FLOPs are counted analytically: 2 per multiply-add of the Linear and Conv2d layers for the "
    "forward pass, a training step taken as 3 forward passes; biases, activations, the optimiser "
    "and FedCurv's Fisher are not counted. Per round: samples trained on (E x the cohort's samples) "
    "x FLOPs per sample step."
)


def target(what: str, workloads: dict, number: str, key: str, field: str, op: str, bound: float) -> dict:
    """One target row: measured value of `field` of implementation `key` of workload `number`."""
    row = {"what": what, "required": f"{op} {bound:g}", "measured": None, "passed": None}
    workload = workloads.get(number)
    entry = (workload or {}).get("implementations", {}).get(key)
    if workload is None:
        row["note"] = f"workload {number} not run"
    elif entry is None or "skipped" in entry:
        row["note"] = entry["skipped"] if entry else f"{key} not run"
    else:
        value = entry[field]
        row["measured"] = value
        row["passed"] = value >= bound if op == ">=" else value <= bound
    return row


def targets(workloads: dict) -> list[dict]:
    rows = [
        target(
            "workload 1: (a) engine vs (c) careful loop, speed-up",
            workloads,
            "1",
            "loop_tensors",
            "time_over_baseline",
            ">=",
            10,
        ),
        target(
            "workload 1: (a) engine vs (d) DataLoader loop, speed-up",
            workloads,
            "1",
            "loop_dataloader",
            "time_over_baseline",
            ">=",
            10,
        ),
        target(
            "workload 1: (a) engine vs (e) Flower, speed-up", workloads, "1", "flower", "time_over_baseline", ">=", 30
        ),
        target(
            "workload 3: (a) engine vs (c) careful loop, speed-up",
            workloads,
            "3",
            "loop_tensors",
            "time_over_baseline",
            ">=",
            1.5,
        ),
        target(
            "workload 8: (a) engine vs (c) careful loop (McMahan CNN, B = 10), speed-up",
            workloads,
            "8",
            "loop_tensors",
            "time_over_baseline",
            ">=",
            2,
        ),
        target(
            "workload 6: (a) engine vs (c) careful loop (shallow ResNet), speed-up",
            workloads,
            "6",
            "loop_tensors",
            "time_over_baseline",
            ">=",
            1.5,
        ),
        target("workload 4: FedCurv / FedAvg round time", workloads, "4", "fedcurv", "time_over_baseline", "<=", 1.3),
    ]
    algorithms = [key for key in workloads.get("5", {}).get("implementations", {}) if key != workloads["5"]["baseline"]]
    for name in algorithms or ["every algorithm"]:
        rows.append(
            target(f"workload 5: {name} / FedAvg round time", workloads, "5", name, "time_over_baseline", "<=", 1.3)
        )
    rows.append(
        target(
            "workload 1: (a) engine FLOP/s / matmul FLOP/s",
            workloads,
            "1",
            "engine_auto",
            "fraction_of_matmul",
            ">=",
            0.5,
        )
    )
    return rows


# ---------------------------------------------------------------- markdown


def number(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def target_lines(rows: list[dict]) -> list[str]:
    lines = ["| target | required | measured | result |", "|---|---|---|---|"]
    for row in rows:
        result = {True: "pass", False: "**MISS**", None: f"n/a ({row.get('note', '')})"}[row["passed"]]
        lines.append(f"| {row['what']} | {row['required']} | {number(row['measured'])} | {result} |")
    return lines


def implementation_lines(workload: dict) -> list[str]:
    lines = [
        "| implementation | s/round (median) | repeats (s/round) | rounds/s | time ÷ baseline's | "
        "GFLOP/s | % of matmul |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in workload["implementations"].values():
        if "skipped" in entry:
            lines.append(f"| {entry['label']} | {entry['skipped']} | | | | | |")
            continue
        repeats = ", ".join(f"{t:.4g}" for t in entry["seconds_per_round_repeats"])
        lines.append(
            f"| {entry['label']} | {entry['seconds_per_round']:.4g} | {repeats} | "
            f"{entry['rounds_per_second']:.3g} | {entry['time_over_baseline']:.3g} | "
            f"{entry['flops_per_second'] / 1e9:.3g} | {100 * entry['fraction_of_matmul']:.3g} % |"
        )
    return lines


def ratio_sentences(workload: dict) -> list[str]:
    """'(a) ... is 12.3× as fast as (c) ...' for every other implementation that ran."""
    entries = workload["implementations"]
    base = entries[workload["baseline"]]
    sentences = []
    for key, entry in entries.items():
        if key != workload["baseline"] and "skipped" not in entry:
            sentences.append(f"- {base['label']} is {entry['time_over_baseline']:.3g}× as fast as {entry['label']}")
    return sentences


def profile_lines(workload: dict) -> list[str]:
    """One line per profiled implementation: its round's top functions by own time."""
    profiles = workload.get("profiles") or {}
    if not profiles:
        return []
    lines = [
        "Where one more round goes (cProfile, own time per function, share of the profiled round; "
        "torch's kernels show as the operator that ran them):",
        "",
    ]
    for key, profile in profiles.items():
        top = "; ".join(
            f"`{row['function']}` {100 * row['share']:.0f} % ({row['calls']} calls)" for row in profile["top"]
        )
        lines.append(f"- {workload['implementations'][key]['label']} ({profile['seconds']:.3g} s profiled): {top}")
    return lines + [""]


def workload_lines(name: str, workload: dict) -> list[str]:
    lines = [f"## Workload {name}: {workload['title']}", ""]
    if workload["reduction"]:
        lines += [
            f"Reduced: {workload['reduction']}; a whole round is about {workload['full_round_scale']:.3g}× "
            "the time per round shown (in the JSON: estimated_seconds_per_full_round).",
            "",
        ]
    lines += [
        f"{workload['clients_per_round']} clients a round, {workload['samples_per_round']} sample steps a "
        f"round, {workload['flops_per_sample_step']:,} FLOPs per sample step, "
        f"{workload['flops_per_round'] / 1e9:.4g} GFLOP a round; {workload['repeats']} repeats of "
        f"{workload['rounds_per_repeat']} round(s); baseline: "
        f"{workload['implementations'][workload['baseline']]['label']}.",
        "",
    ]
    lines += implementation_lines(workload) + [""] + ratio_sentences(workload) + [""] + profile_lines(workload)
    return lines


def markdown(summary: dict) -> str:
    machine, matmul = summary["machine"], summary["matmul"]
    gflops = matmul["flops_per_second"] / 1e9
    lines = [
        "# Speed benchmark",
        "",
        f"{summary['date']}; {machine['device_name']} ({machine['logical_cores']} logical cores), device "
        f"{machine['device']}, torch {machine['torch']} with {machine['torch_threads']} threads, "
        f"Python {machine['python']}.",
        "",
        f"Data: {summary['data']}; sizes {summary['sizes']}. Matmul microbenchmark: float32 torch.mm "
        f"{matmul['size']}×{matmul['size']}, best of {matmul['repeats']}: {gflops:.4g} GFLOP/s.",
        "",
    ]
    flower = summary["flower"]
    if flower["flwr"]:
        lines += [
            f"Flower: flwr {flower['flwr']}, {flower['api']}, client resources {flower['client_resources']}; "
            f"round time: {flower['round_time']}.",
            "",
        ]
    if summary["sizes"] == "tiny":
        lines += ["**Tiny sizes (smoke test): the numbers say nothing about speed.**", ""]
    lines += ["## Targets", ""] + target_lines(summary["targets"]) + ["", summary["flops_note"], ""]
    for name, workload in summary["workloads"].items():
        lines += workload_lines(name, workload)
    return "\n".join(lines)
