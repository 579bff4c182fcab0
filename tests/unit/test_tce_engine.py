"""What the TCE paper adds to the engine: data augmentation keyed by (seed, round, client), the models with
a `norm` choice (the small CNN and the CIFAR ResNet-18), and evaluation on the clients' validation sets."""

from __future__ import annotations

import pytest
import torch

from pipeline import models
from pipeline.clientdata import crop_flip, crop_flip_draws, generator_for
from pipeline.cohort import AugmentDraws
from pipeline.rounds import initial_state, run_round
from pipeline.runs import check_run
from support import synthetic
from support.algorithms import fedavg
from support.oracles import has_batch_norm

IMAGE = (8, 8, 3)
CLASSES = 4


# ---------------------------------------------------------------- random crop + flip


def test_crop_flip_by_hand_on_a_two_by_two_image():
    image = torch.tensor([[1.0, 2.0], [3.0, 4.0]]).view(1, 1, 2, 2)
    fill = torch.tensor([0.0])
    top_left = crop_flip(image, torch.tensor([[0, 0, 0]]), fill, padding=1)
    assert top_left.view(2, 2).tolist() == [[0.0, 0.0], [0.0, 1.0]]
    bottom_right_flipped = crop_flip(image, torch.tensor([[2, 2, 1]]), fill, padding=1)
    assert bottom_right_flipped.view(2, 2).tolist() == [[0.0, 4.0], [0.0, 0.0]]
    centre = crop_flip(image, torch.tensor([[1, 1, 0]]), fill, padding=1)
    assert torch.equal(centre, image)


def test_crop_flip_matches_a_per_image_pad_slice_flip_loop():
    g = torch.Generator().manual_seed(3)
    images = torch.randn(12, 3, 7, 9, generator=g)
    fill = torch.tensor([-1.0, 0.5, 2.0])
    draws = crop_flip_draws(12, g, padding=2)
    assert draws[:, :2].min() >= 0 and draws[:, :2].max() <= 4 and set(draws[:, 2].tolist()) <= {0, 1}
    got = crop_flip(images, draws, fill, padding=2)
    for n in range(12):
        padded = fill.view(3, 1, 1).repeat(1, 7 + 4, 9 + 4)
        padded[:, 2:9, 2:11] = images[n]
        row, col, flip = draws[n].tolist()
        expected = padded[:, row : row + 7, col : col + 9]
        if flip:
            expected = expected.flip(-1)
        assert torch.equal(got[n], expected), n


def test_augment_draws_differ_between_clients_and_rounds_and_repeat_for_the_same_key():
    fill = torch.zeros(3)
    x = torch.randn(2, 4, 3, 8, 8)
    active = torch.tensor([True, True])
    first = AugmentDraws([0, 1], seed=1, round_=1, batch_size=4, fill=fill).stacked(x.clone(), active)
    again = AugmentDraws([0, 1], seed=1, round_=1, batch_size=4, fill=fill).stacked(x.clone(), active)
    later = AugmentDraws([0, 1], seed=1, round_=2, batch_size=4, fill=fill).stacked(x.clone(), active)
    assert torch.equal(first, again)
    assert not torch.equal(first, later)
    swapped = AugmentDraws([1, 0], seed=1, round_=1, batch_size=4, fill=fill).stacked(x.flip(0), active)
    assert torch.equal(swapped.flip(0), first)  # keyed by client, not by position in the cohort


def test_black_pixel_is_the_padding_fill():
    data = synthetic.make_data([4, 4], shape=IMAGE, classes=CLASSES)
    black = torch.zeros(1, *IMAGE, dtype=torch.uint8)
    data.x[0] = black[0]
    torch.testing.assert_close(data.inputs(torch.tensor([0]))[0, :, 0, 0], data.black())


# ---------------------------------------------------------------- a round with augmentation and a norm


def one_round(model_name, norm, vectorized, max_chunk=None, **overrides):
    data = synthetic.make_data([6, 9, 5], shape=IMAGE, classes=CLASSES)
    for client, classes in enumerate(([0, 1], [1, 2], [2, 3])):  # label skew, so TCE's mask matters
        data.y[data.clients[client]] = torch.tensor(classes).repeat(len(data.clients[client]))[
            : len(data.clients[client])
        ]
    model = models.build_model(model_name, IMAGE, CLASSES, 0, norm)
    state = initial_state(model, fedavg, len(data.clients), {})
    settings = synthetic.run_settings(5, **{"augment": "crop_flip", "loss": "tce", **overrides})
    return run_round(model, fedavg, {}, state, data, settings, 1, vectorized=vectorized, max_chunk=max_chunk).state


@pytest.mark.parametrize("model_name", ["cnn_small", "resnet18"])
def test_augmented_group_norm_round_is_the_same_on_both_paths_and_any_chunking(model_name):
    """Augmentation draws come from each client's own generator, for a full batch (the short last
    batch of clients of 9 and 5 samples takes its present samples' draws): both paths, any chunk."""
    reference = one_round(model_name, "group", vectorized=False)
    start = initial_state(models.build_model(model_name, IMAGE, CLASSES, 0), fedavg, 3, {})["params"]
    assert any((reference["params"][n] - start[n]).abs().max() > 1e-4 for n in start)
    for label, state in {
        "vectorized": one_round(model_name, "group", vectorized=True),
        "vectorized, chunks of 1": one_round(model_name, "group", vectorized=True, max_chunk=1),
        "sequential, chunks of 1": one_round(model_name, "group", vectorized=False, max_chunk=1),
    }.items():
        for name, value in state["params"].items():
            torch.testing.assert_close(value, reference["params"][name], atol=2e-5, rtol=1e-4, msg=f"{label}: {name}")
    plain = one_round(model_name, "group", vectorized=False, augment="none")
    assert any((plain["params"][n] - reference["params"][n]).abs().max() > 1e-4 for n in start)


def test_batch_norm_choice_gives_running_statistics_group_norm_none():
    batch = one_round("cnn_small", "batch", vectorized=False)
    group = one_round("cnn_small", "group", vectorized=False)
    assert {name.split(".")[-1] for name in batch["buffers"]} == {"running_mean", "running_var", "num_batches_tracked"}
    assert group["buffers"] == {}
    assert not has_batch_norm(models.build_model("cnn_small", IMAGE, CLASSES, 0, "none"))


def test_resnet18_is_the_cifar_variant():
    """11,173,962 parameters for 10 classes: the count of the CIFAR ResNet-18 (3x3 stem, no max-pool)
    that public CIFAR code reports; GroupNorm has BatchNorm's affine parameters, so the same count."""
    for norm in ("batch", "group"):
        net = models.build_model("resnet18", (32, 32, 3), 10, 0, norm)
        assert sum(p.numel() for p in net.parameters()) == 11_173_962
    net = models.build_model("resnet18", (32, 32, 3), 10, 0)
    assert not has_batch_norm(net)  # GroupNorm is the default
    assert sum(isinstance(m, torch.nn.GroupNorm) and m.num_groups == 2 for m in net.modules()) == 20
    assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


# ---------------------------------------------------------------- run settings

PARAMS = {
    "partitions": {
        "with_val": {"dataset": "cifar10", "scheme": "iid", "clients": 2, "val_fraction": 0.1},
        "no_val": {"dataset": "cifar10", "scheme": "iid", "clients": 2},
    }
}
RUN = {
    "partition": "with_val",
    "model": "cnn_small",
    "algorithm": {"name": "fedavg"},
    "rounds": 2,
    "client_fraction": 1.0,
    "local_epochs": 1,
    "batch_size": 4,
    "lr": 0.1,
}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"model": "mlp_200", "norm": "group"}, "runs.r.norm: model mlp_200 has no norm option"),
        ({"norm": "layer"}, "runs.r.norm"),
        ({"augment": "mixup"}, "runs.r.augment"),
        ({"evaluate_on": "train"}, "runs.r.evaluate_on"),
        ({"partition": "no_val", "evaluate_on": "validation"}, "partition no_val has no val_fraction"),
    ],
)
def test_bad_tce_settings_name_the_setting(overrides, message):
    problems = check_run("runs.r", {**RUN, **overrides}, PARAMS)
    assert any(message in p for p in problems), problems


def test_good_tce_settings_pass():
    assert (
        check_run(
            "runs.r",
            {**RUN, "norm": "batch", "augment": "crop_flip", "evaluate_on": "validation", "loss": "tce"},
            PARAMS,
        )
        == []
    )


def test_generator_streams_for_augmentation_are_their_own():
    from pipeline.clientdata import AUGMENT_STREAM, DROPOUT_STREAM

    a = torch.randint(0, 9, (8,), generator=generator_for(1, 1, 0, AUGMENT_STREAM))
    b = torch.randint(0, 9, (8,), generator=generator_for(1, 1, 0, DROPOUT_STREAM))
    assert not torch.equal(a, b)


def test_a_scaled_model_or_partition_that_breaks_norm_or_evaluate_on_is_named():
    """Neither key is wrong alone; the default profile's merge makes them so (else training would fail
    deep inside model building or with an empty validation set)."""
    from pipeline.config import check_runs

    run = {**RUN, "norm": "batch", "evaluate_on": "validation", "scaled": {"model": "mlp_200", "partition": "no_val"}}
    problems = check_runs({**PARAMS, "runs": {"r": run}})
    assert any(p.startswith("runs.r.norm: model mlp_200 has no norm option") and "scaled model" in p for p in problems)
    assert any(p.startswith("runs.r.evaluate_on:") and "scaled partition" in p for p in problems)


# ---------------------------------------------------------------- the test set at the last evaluated rounds


@pytest.mark.parametrize(
    ("rounds", "every", "expected"),
    [
        (60, 5, {40, 45, 50, 55, 60}),
        (12, 5, {5, 10, 12}),  # the last round is always evaluated; fewer than 5 evaluated rounds: all of them
        (7, 1, {3, 4, 5, 6, 7}),
    ],
)
def test_the_test_set_rounds_are_the_last_five_evaluated_rounds(rounds, every, expected):
    from pipeline.settings import Schedule
    from pipeline.training import rounds_also_on_the_test_set

    schedule = Schedule(rounds=rounds, eval_every=every, evaluate_on="validation", checkpoint_every=10, targets=())
    assert rounds_also_on_the_test_set(schedule) == expected
