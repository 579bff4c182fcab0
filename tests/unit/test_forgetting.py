"""The forgetting measurements against hand-worked numbers: local client forgetting (TCE), forgettable
examples (FedWAvg), example-forgetting events (Toneva et al.), the accuracy summary, and the probe
files and plots (NaN round trip, PNG output, no temporary files left behind)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from pipeline.forgetting import (
    accuracy_spread,
    forgettable_counts,
    local_client_forgetting,
    new_presentation_record,
    presentation_summary,
    record_presentations,
)
from pipeline.probe_files import (
    plot_forgettable_curves,
    plot_forgetting_heatmaps,
    read_probes,
    tick_positions,
    write_probes,
)
from support.helpers import PNG_SIGNATURE
from support.oracles import forgetting_events

T, F_ = True, False


def t64(values):
    return torch.tensor(values, dtype=torch.float64)


def close(actual, expected):
    torch.testing.assert_close(actual, t64(expected), rtol=0, atol=1e-12)


# --- local client forgetting -------------------------------------------------------------------------


def test_local_client_forgetting_two_clients_by_hand():
    # Rows k = whose data, columns i = whose local model.
    difference, average = local_client_forgetting(t64([[0.9, 0.2], [0.5, 0.8]]), t64([0.6, 0.4]))
    close(difference, [[0.3, -0.4], [0.1, 0.4]])
    # F_0 is client 1's model on client 0's data (-0.4), not the diagonal nor column 0.
    close(average, [-0.4, 0.1])


def test_local_client_forgetting_three_clients_by_hand():
    post = t64([[0.5, 0.7, 0.1], [0.2, 0.6, 0.9], [0.3, 0.3, 0.8]])
    prior = t64([0.4, 0.5, 0.6])
    difference, average = local_client_forgetting(post, prior)
    close(difference, [[0.1, 0.3, -0.3], [-0.3, 0.1, 0.4], [-0.3, -0.3, 0.2]])
    # (0.3 - 0.3)/2, (-0.3 + 0.4)/2, (-0.3 - 0.3)/2; with the diagonal included they would be
    # 0.1/3, 0.2/3 and -0.4/3, and averaged over columns instead of rows -0.5/2, 0.0, 0.1/2.
    close(average, [0.0, 0.05, -0.3])


def test_local_client_forgetting_ignores_the_diagonal():
    post = t64([[0.5, 0.7, 0.1], [0.2, 0.6, 0.9], [0.3, 0.3, 0.8]])
    changed = post.clone()
    changed.fill_diagonal_(0.0)
    _, average = local_client_forgetting(post, t64([0.4, 0.5, 0.6]))
    _, average_changed = local_client_forgetting(changed, t64([0.4, 0.5, 0.6]))
    torch.testing.assert_close(average, average_changed)


def test_local_client_forgetting_single_client_is_nan():
    difference, average = local_client_forgetting(t64([[0.7]]), t64([0.5]))
    close(difference, [[0.2]])
    assert average.shape == (1,) and math.isnan(float(average[0]))


def test_local_client_forgetting_rejects_bad_shapes():
    with pytest.raises(ValueError):
        local_client_forgetting(t64([[0.1, 0.2]]), t64([0.1]))
    with pytest.raises(ValueError):
        local_client_forgetting(t64([[0.1, 0.2], [0.3, 0.4]]), t64([0.1, 0.2, 0.3]))


# --- forgettable examples ----------------------------------------------------------------------------


def test_forgettable_counts_by_hand_with_padding():
    local = torch.tensor([[T, T, F_, T], [T, F_, T, T]])
    glob = torch.tensor([[F_, T, T, F_], [F_, F_, F_, F_]])
    valid = torch.tensor([[T, T, T, T], [T, T, F_, F_]])
    # Client 0: example 0 and 3 (local right, global wrong); 1 kept; 2 learned by the global model.
    # Client 1: only example 0; examples 2 and 3 would count too but are padding.
    counts = forgettable_counts(local, glob, valid)
    assert counts.dtype == torch.long
    assert counts.tolist() == [2, 1]
    assert forgettable_counts(local, glob, torch.ones_like(valid)).tolist() == [2, 3]


def test_forgettable_counts_rejects_mismatched_or_non_bool():
    a = torch.zeros(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError):
        forgettable_counts(a, torch.zeros(2, 4, dtype=torch.bool), a)
    with pytest.raises(ValueError):
        forgettable_counts(a.long(), a, a)


# --- example-forgetting events -----------------------------------------------------------------------


def test_the_dense_oracle_counts_the_by_hand_events():
    # tests/oracles.py's count over every presentation, which other tests compare the engine's with.
    # One column per example, one row per presentation.
    columns = [
        [1, 0, 1, 0],  # forgotten twice
        [0, 0, 1, 1],  # learned, never forgotten
        [1, 1, 0, 0],  # forgotten once
        [0, 1, 0, 1],  # wrong first (no event), then forgotten once
        [0, 0, 0, 0],  # never learned: no event
        [1, 1, 1, 1],
    ]  # never forgotten
    correct = torch.tensor(columns, dtype=torch.bool).T
    events = forgetting_events(correct)
    assert events.dtype == torch.long
    assert events.tolist() == [2, 0, 1, 1, 0, 0]


def test_the_dense_oracle_on_short_sequences():
    assert forgetting_events(torch.tensor([[1], [1], [0]], dtype=torch.bool)).tolist() == [1]
    assert forgetting_events(torch.tensor([[0], [1], [1]], dtype=torch.bool)).tolist() == [0]
    # A single presentation cannot hold an event.
    assert forgetting_events(torch.tensor([[1, 0]], dtype=torch.bool)).tolist() == [0, 0]


def test_streamed_presentations_give_the_by_hand_events_across_rounds_and_padding():
    """The engine's streaming count (record_presentations): the by-hand columns above, presented in a
    shuffled order two examples per step with padded slots, split over two calls (two rounds)."""
    columns = [[1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 0, 0], [0, 1, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]]
    order = [[3, 0], [5, 1], [2, 4]]  # a presentation of every example: three steps of two
    positions, correct = [], []
    for t in range(4):
        for pair in order if t % 2 == 0 else order[::-1]:
            positions.append(pair + [-1])  # a padded third slot, marked right to check it is ignored
            correct.append([bool(columns[e][t]) for e in pair] + [True])
    positions, correct = torch.tensor(positions), torch.tensor(correct)
    record = new_presentation_record(6)
    first = record_presentations(record, positions[:7], correct[:7])
    second = record_presentations(record, positions[7:], correct[7:])
    assert first + second == 4
    assert record["forgets"].tolist() == [2, 0, 1, 1, 0, 0]
    assert presentation_summary({0: record}) == {
        "forgetting_events": 4,
        "forgotten_examples": 3,
        "unforgettable_examples": 2,
        "never_learned_examples": 1,
    }


def test_presentation_summary_counts_unpresented_examples_as_never_learned():
    record = new_presentation_record(3)
    record_presentations(record, torch.tensor([[0, -1]]), torch.tensor([[True, False]]))
    assert presentation_summary({4: record}) == {
        "forgetting_events": 0,
        "forgotten_examples": 0,
        "unforgettable_examples": 1,
        "never_learned_examples": 2,
    }


# --- accuracy summary --------------------------------------------------------------------------------


def test_accuracy_spread_by_hand():
    summary = accuracy_spread(t64([0.8, 0.5, 0.9, 0.6]))
    assert summary["mean"] == pytest.approx(0.7)
    # Deviations 0.1, -0.2, 0.2, -0.1: squares sum to 0.1; sample sd sqrt(0.1/3).
    assert summary["sd"] == pytest.approx(0.18257418583505536)
    assert summary["min"] == pytest.approx(0.5)
    assert summary["worst_client"] == 1
    assert summary["max"] == pytest.approx(0.9)


def test_accuracy_spread_single_client_and_ties():
    one = accuracy_spread(t64([0.4]))
    assert math.isnan(one["sd"]) and one["worst_client"] == 0 and one["mean"] == pytest.approx(0.4)
    assert accuracy_spread(t64([0.7, 0.3, 0.3]))["worst_client"] == 1


# --- probe files and plots ---------------------------------------------------------------------------


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp"))


def test_probe_round_trip_with_nan(tmp_path):
    post, prior = t64([[0.7]]), t64([0.5])
    difference, average = local_client_forgetting(post, prior)
    path = tmp_path / "rounds.json"
    write_probes(
        path, {3: {"round": 3, "clients": [7], "post": post, "prior": prior, "difference": difference, "F": average}}
    )
    text = path.read_text()
    assert "NaN" not in text and "null" in text
    assert list(json.loads(text)) == ["3"]  # strict JSON, keyed by the round
    (round_, back), *others = read_probes(path).items()
    assert round_ == 3 and others == []
    assert back["round"] == 3 and back["clients"] == [7]
    assert back["post"] == [[0.7]] and back["prior"] == [0.5]
    assert back["difference"][0][0] == pytest.approx(0.2)
    assert len(back["F"]) == 1 and math.isnan(back["F"][0])
    assert leftovers(tmp_path) == []


def test_read_probes_reports_missing_and_corrupt_files(tmp_path):
    from pipeline.errors import UserError

    with pytest.raises(UserError, match="not found"):
        read_probes(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(UserError, match="bad.json"):
        read_probes(tmp_path / "bad.json")
    (tmp_path / "flat.json").write_text('{"round": 3, "F": [0.1]}')  # one record, not keyed by round
    with pytest.raises(UserError, match="flat.json: a probes file maps round numbers to records"):
        read_probes(tmp_path / "flat.json")


def test_tick_positions():
    assert tick_positions(5) == [0, 1, 2, 3, 4]
    assert tick_positions(20) == list(range(20))
    few = tick_positions(50)
    assert few[0] == 0 and few[-1] == 49 and len(few) <= 8


@pytest.mark.parametrize("k", [1, 3, 25])
def test_heatmap_png_written(tmp_path, k):
    g = torch.Generator().manual_seed(k)
    post, prior = torch.rand(k, k, generator=g, dtype=torch.float64), torch.rand(k, generator=g, dtype=torch.float64)
    difference, average = local_client_forgetting(post, prior)
    probe = tmp_path / "rounds.json"
    write_probes(
        probe,
        {
            1: {
                "round": 1,
                "clients": list(range(10, 10 + k)),
                "post": post,
                "prior": prior,
                "difference": difference,
                "F": average,
            }
        },
    )
    png = tmp_path / "heatmaps.png"
    plot_forgetting_heatmaps(png, read_probes(probe)[1], f"round 1, K={k}")
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    assert leftovers(tmp_path) == []


def test_heatmap_computes_missing_difference(tmp_path):
    png = tmp_path / "h.png"
    plot_forgetting_heatmaps(png, {"clients": [0, 1], "post": [[0.9, 0.2], [0.5, 0.8]], "prior": [0.6, 0.4]}, "t")
    assert png.read_bytes()[:8] == PNG_SIGNATURE


def test_forgettable_curves_png_written(tmp_path):
    png = tmp_path / "curves.png"
    # Client 5 was not in round 1's cohort.
    plot_forgettable_curves(png, [1, 2, 3], {0: [3, 1, 4], 5: [None, 2, 0]}, "forgettable examples")
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    many = tmp_path / "many.png"
    plot_forgettable_curves(many, [1, 2], {str(c): [c, c + 1] for c in range(15)}, "no legend")
    assert many.read_bytes()[:8] == PNG_SIGNATURE
    assert leftovers(tmp_path) == []


def test_forgettable_curves_rejects_misaligned_counts(tmp_path):
    with pytest.raises(ValueError):
        plot_forgettable_curves(tmp_path / "x.png", [1, 2, 3], {0: [1, 2]}, "t")
    assert not (tmp_path / "x.png").exists()
