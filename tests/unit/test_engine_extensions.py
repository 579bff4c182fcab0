"""The engine's extension points: randomness keyed by client (dropout), BatchNorm buffers, the loss hook
(TCE), client optimisers through a whole round, the per-client store, the after-aggregation hook, the
upload's view of the local result, and the forgetting probes against per-sample loops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline import models
from pipeline.algorithms import as_algorithm
from pipeline.clientdata import ClientData
from pipeline.losses import client_logit_mask, per_sample_loss
from pipeline.rounds import initial_state, probe_positions, run_round
from support import synthetic
from support.algorithms import fedavg, fedcurv

IMAGE = (8, 8, 1)
CLASSES = 4


def make_data(sizes=(6, 9, 5), shape=IMAGE, classes=CLASSES, seed=0) -> ClientData:
    return synthetic.make_data(list(sizes), shape=shape, classes=classes, seed=seed)


def settings(**overrides) -> dict:
    return synthetic.run_settings(7, **overrides)


def build(name, seed=0):
    return models.build_model(name, IMAGE, CLASSES, seed)


def flat(state):
    return {**state["params"], **state["buffers"]}


def one_round(model_name, algorithm=fedavg, hp=None, data=None, run_settings=None, **kwargs):
    hp = hp or {}
    model = build(model_name)
    data = data or make_data()
    state = initial_state(model, algorithm, len(data.clients), hp)
    return run_round(model, algorithm, hp, state, data, run_settings or settings(), 1, **kwargs), model, data, state


# ---------------------------------------------------------------- randomness keyed by (seed, round, client)


def test_dropout_cnn_round_is_the_same_on_both_paths_and_for_any_chunk_size():
    """cnn_mnist has two dropouts: its masks come from each client's own generator, so the vectorized
    path, the sequential path and chunks of one client or of all give the same parameters."""
    runs = {
        "vectorized, one chunk": one_round("cnn_mnist", vectorized=True)[0],
        "vectorized, chunks of 1": one_round("cnn_mnist", vectorized=True, max_chunk=1)[0],
        "sequential, one chunk": one_round("cnn_mnist", vectorized=False)[0],
        "sequential, chunks of 1": one_round("cnn_mnist", vectorized=False, max_chunk=1)[0],
    }
    reference = flat(runs["sequential, one chunk"].state)
    start = flat(initial_state(build("cnn_mnist"), fedavg, 3, {}))
    assert any((reference[n] - start[n]).abs().max() > 1e-3 for n in start)
    for label, result in runs.items():
        for name, value in flat(result.state).items():
            torch.testing.assert_close(value, reference[name], atol=1e-5, rtol=1e-5, msg=f"{label}: {name}")


def test_dropout_masks_differ_between_clients_and_rounds():
    """Keyed streams are not one stream repeated: two clients with the same data would otherwise agree."""
    from pipeline.cohort import DropoutDraws

    model = build("cnn_mnist")
    example = torch.zeros(1, 1, 8, 8)
    first = DropoutDraws(model, [0, 1], seed=1, round_=1, batch_size=4, example_input=example)
    again = DropoutDraws(model, [0, 1], seed=1, round_=2, batch_size=4, example_input=example)
    a, b, c = first.one(0), first.one(1), again.one(0)
    assert set(a) == {"5.mask", "9.mask"}
    assert not torch.equal(a["5.mask"], b["5.mask"]) and not torch.equal(a["5.mask"], c["5.mask"])
    keep = 1 - 0.25
    assert set(torch.unique(a["5.mask"]).tolist()) <= {0.0, torch.tensor(1 / keep).item()}


# ---------------------------------------------------------------- BatchNorm buffers


@pytest.mark.parametrize("vectorized", [False, True])
def test_batchnorm_buffers_are_the_sample_weighted_average_of_the_clients(vectorized):
    """Each client trained alone by plain torch gives its running statistics; the server's must be
    their average weighted by sample counts, computed here by hand, on either path (the vectorized one
    pads the clients' batches to the longest and must keep padding out of the statistics)."""
    sizes = (6, 9, 5)
    data = make_data(sizes)
    result, model, _, state = one_round("cnn_fedavg_bn", data=data, vectorized=vectorized)
    assert result.state["buffers"], "the BatchNorm model has buffers"
    per_client = []
    for client in range(3):
        alone = ClientData(data.x, data.y, [data.clients[client]], data.mean, data.std, classes=CLASSES)
        # The same client's schedule: seeded by (seed, round, client), so rebuild with its id via a sampler shim.
        per_client.append(train_alone(model, alone, client, state))
    total = sum(sizes)
    for name, value in result.state["buffers"].items():
        if value.dtype.is_floating_point:
            expected = sum(n / total * buffers[name] for n, buffers in zip(sizes, per_client))
            torch.testing.assert_close(value, expected, atol=1e-5, rtol=1e-5, msg=name)
        else:  # num_batches_tracked: the cohort's largest count
            assert int(value) == max(int(b[name]) for b in per_client)
            assert int(value) > 0


def train_alone(model, data_one, client, state):
    """Train one client by plain torch (nn.Module in train mode, torch.optim.SGD) on the engine's batch order."""
    import copy

    from pipeline.clientdata import client_schedule, generator_for

    net = copy.deepcopy(model)
    net.load_state_dict({**state["params"], **state["buffers"]}, strict=False)
    net.train()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    samples = data_one.clients[0]
    for positions in client_schedule(len(samples), 2, 4, generator_for(7, 1, client)):
        chosen = samples[positions[positions >= 0]]
        optimizer.zero_grad()
        F.cross_entropy(net(data_one.inputs(chosen)), data_one.y[chosen]).backward()
        optimizer.step()
    return {name: value.detach() for name, value in net.named_buffers() if not name.endswith(".mask")}


def keyed_and_plain_batch_norm(momentum=0.1, dtype=torch.float64):
    keyed, plain = models.KeyedBatchNorm2d(5, momentum=momentum).to(dtype), torch.nn.BatchNorm2d(5, momentum=momentum)
    plain = plain.to(dtype)
    with torch.no_grad():
        keyed.weight.normal_(generator=torch.Generator().manual_seed(1))
        keyed.bias.normal_(generator=torch.Generator().manual_seed(2))
        keyed.running_mean.fill_(0.3)
    plain.load_state_dict(keyed.state_dict())
    return keyed, plain


@pytest.mark.parametrize("spatial", [1, 3])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_keyed_batch_norm_with_padding_is_torchs_batch_norm_on_the_present_samples(spatial, momentum):
    """The batch with padding (`present`) against torch's BatchNorm2d on the present samples alone, in
    float64: outputs, gradients (none reach the padding), running statistics and their count."""
    keyed, plain = keyed_and_plain_batch_norm(momentum)
    x = torch.randn(6, 5, spatial, spatial, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3 + 1
    present = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    upstream = torch.randn(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    padded, alone = x.clone().requires_grad_(), x[present > 0].clone().requires_grad_()
    keyed.present = present
    for _ in range(2):  # the second step reads the first's running statistics (momentum None: a mean of 2)
        out = keyed(padded)
        (out * upstream).sum().backward()  # padding's upstream gradient too: it must reach nothing
        reference = plain(alone)
        (reference * upstream[present > 0]).sum().backward()
    torch.testing.assert_close(out[present > 0], reference, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(padded.grad[present > 0], alone.grad, atol=1e-12, rtol=1e-12)
    assert torch.equal(padded.grad[present == 0], torch.zeros_like(padded.grad[present == 0]))
    for name in ("weight", "bias"):
        torch.testing.assert_close(getattr(keyed, name).grad, getattr(plain, name).grad, atol=1e-12, rtol=1e-12)
    for name in ("running_mean", "running_var"):
        torch.testing.assert_close(getattr(keyed, name), getattr(plain, name), atol=1e-12, rtol=1e-12)
    assert int(keyed.num_batches_tracked) == int(plain.num_batches_tracked) == 2


def test_keyed_batch_norm_with_no_sample_present_leaves_its_running_statistics_alone():
    keyed, _ = keyed_and_plain_batch_norm()
    before = {name: value.clone() for name, value in keyed.named_buffers() if name != "present"}
    keyed.present = torch.zeros(4, dtype=torch.float64)
    out = keyed(torch.randn(4, 5, 2, 2, dtype=torch.float64))
    assert torch.isfinite(out).all()
    for name, value in before.items():
        assert torch.equal(getattr(keyed, name), value), name


def test_keyed_batch_norm_without_present_is_torchs_batch_norm_bit_for_bit():
    """The sequential path and evaluation: the same numbers as before BatchNorms were keyed."""
    keyed, plain = keyed_and_plain_batch_norm(dtype=torch.float32)
    x = torch.randn(7, 5, 3, 3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(keyed(x), plain(x))
    assert torch.equal(keyed.running_var, plain.running_var)
    keyed.eval(), plain.eval()
    assert torch.equal(keyed(x), plain(x))


@pytest.mark.parametrize("name", ["cnn_fedavg_bn", "densenet121"])
def test_every_batch_norm_of_a_built_model_is_keyed_and_its_state_unchanged(name):
    """torchvision's DenseNet too; the state (parameters, running statistics) keeps its names, order and
    values, and `present` is a per-step input, not server state."""
    shape = (16, 16, 3)
    model = models.build_model(name, shape, CLASSES, 0)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert norms and all(type(m) is models.KeyedBatchNorm2d for m in norms)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        plain = models.MODELS[name](shape, CLASSES)
    assert list(model.state_dict()) == list(plain.state_dict())
    for key, value in plain.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    assert not any(key.endswith(".present") for key in models.model_buffers(model))
    assert len(models.batch_norm_presence(model)) == len(norms)


def test_a_cohort_of_one_client_takes_the_sequential_path_automatically():
    from pipeline.cohort import prefer_vectorized

    mlp = build("mlp_200")
    assert prefer_vectorized(mlp, torch.device("cpu"), cohort_clients=10)
    assert not prefer_vectorized(mlp, torch.device("cpu"), cohort_clients=1)
    assert not prefer_vectorized(mlp, torch.device("cuda"), cohort_clients=1)


def test_cached_scaling_stats_are_the_computed_ones_and_are_read_back(tmp_path):
    from pipeline.clientdata import cached_scaling_stats

    x = torch.randint(0, 256, (50, 6, 6, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    pixels = x.reshape(-1, 3).double() / 255.0  # independent: float64, by hand
    mean, std = cached_scaling_stats(x, "standardize", "sha-a", tmp_path)
    assert torch.allclose(mean.double(), pixels.mean(0), atol=1e-6)
    assert torch.allclose(std.double(), pixels.std(0), atol=1e-6)
    store = tmp_path / "scaling_stats"  # FEDFORGET_CACHE's subfolder for these
    assert len(list(store.iterdir())) == 1
    # Read back, bit for bit: a different tensor under the same key gets the stored statistics.
    again = cached_scaling_stats(torch.zeros_like(x), "standardize", "sha-a", tmp_path)
    assert torch.equal(again[0], mean) and torch.equal(again[1], std)
    # Another file's checksum is another key; a cut-short cache file is recomputed, not trusted.
    other = cached_scaling_stats(torch.zeros_like(x), "standardize", "sha-b", tmp_path)
    assert torch.equal(other[0], torch.zeros(3))
    stored = next(p for p in store.iterdir() if torch.equal(torch.load(p)[0], mean))
    stored.write_bytes(stored.read_bytes()[:20])
    recomputed = cached_scaling_stats(torch.zeros_like(x), "standardize", "sha-a", tmp_path)
    assert torch.equal(recomputed[0], torch.zeros(3))
    # Unit scaling stores nothing.
    before = sorted(store.iterdir())
    shift, scale = cached_scaling_stats(x, "unit", "sha-c", tmp_path)
    assert torch.equal(shift, torch.zeros(3)) and torch.equal(scale, torch.ones(3))
    assert sorted(store.iterdir()) == before


# ---------------------------------------------------------------- the loss hook: TCE


def test_tce_gives_absent_classes_exactly_zero_gradient():
    logits = torch.randn(5, CLASSES, requires_grad=True)
    y = torch.tensor([0, 2, 2, 0, 2])
    keep = torch.tensor([True, False, True, False])
    per_sample_loss(logits, y, keep).mean().backward()
    assert torch.equal(logits.grad[:, [1, 3]], torch.zeros(5, 2))
    assert logits.grad[:, [0, 2]].abs().min() > 0


def test_tce_loss_is_the_hand_computed_truncated_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
    keep = torch.tensor([True, False, True, False])
    by_hand = -(2.0 - torch.log(torch.exp(torch.tensor(2.0)) + torch.exp(torch.tensor(0.5))))
    torch.testing.assert_close(per_sample_loss(logits, torch.tensor([0]), keep)[0], by_hand)


def test_a_client_with_every_class_gets_plain_cross_entropy():
    logits, y = torch.randn(6, CLASSES), torch.tensor([0, 1, 2, 3, 0, 1])
    keep = torch.ones(CLASSES, dtype=torch.bool)
    torch.testing.assert_close(per_sample_loss(logits, y, keep), F.cross_entropy(logits, y, reduction="none"))


def test_tce_masks_are_each_clients_whole_label_set():
    data = make_data()
    keep = client_logit_mask("tce", data, [0, 2])
    for row, client in enumerate([0, 2]):
        present = set(data.y[data.clients[client]].tolist())
        assert {c for c in range(CLASSES) if keep[row, c]} == present
    assert client_logit_mask("ce", data, [0, 2]) is None


def label_skewed_data():
    """Clients holding two classes each, so TCE's mask changes the objective."""
    data = make_data((8, 8, 8))
    for client, classes in enumerate(([0, 1], [1, 2], [2, 3])):
        data.y[data.clients[client]] = torch.tensor(classes).repeat(4)
    return data


@pytest.mark.parametrize(
    "model_name, momentum",
    [("mlp_200", 0.0), ("mlp_200", 0.9), ("cnn_fedavg", 0.0)],
    ids=["fused_mlp", "mlp_with_momentum", "cnn_vmap"],
)
def test_tce_rounds_agree_between_paths_and_differ_from_ce(model_name, momentum):
    run_settings = settings(loss="tce", momentum=momentum)
    vec = one_round(model_name, data=label_skewed_data(), run_settings=run_settings, vectorized=True)[0]
    seq = one_round(model_name, data=label_skewed_data(), run_settings=run_settings, vectorized=False)[0]
    ce = one_round(model_name, data=label_skewed_data(), run_settings=settings(momentum=momentum), vectorized=False)[0]
    for name, value in vec.state["params"].items():
        torch.testing.assert_close(value, seq.state["params"][name], atol=1e-5, rtol=1e-5, msg=name)
    assert any((vec.state["params"][n] - ce.state["params"][n]).abs().max() > 1e-4 for n in vec.state["params"])


# ---------------------------------------------------------------- client optimisers through a round


def test_adam_round_agrees_between_paths_and_with_torch_optim_for_one_client():
    run_settings = settings(optimizer="adam", lr=0.01, weight_decay=1e-3, local_epochs=1)
    data = make_data()
    vec = one_round("mlp_200", data=data, run_settings=run_settings, vectorized=True)[0]
    seq = one_round("mlp_200", data=data, run_settings=run_settings, vectorized=False)[0]
    for name, value in vec.state["params"].items():
        torch.testing.assert_close(value, seq.state["params"][name], atol=1e-5, rtol=1e-5, msg=name)
    # One client alone, against torch.optim.Adam on the engine's batch order.
    from pipeline.clientdata import client_schedule, generator_for

    one = ClientData(data.x, data.y, [data.clients[0]], data.mean, data.std, classes=CLASSES)
    result, model, _, state = one_round("mlp_200", data=one, run_settings=run_settings, vectorized=True)
    net = build("mlp_200")
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=1e-3)
    samples = one.clients[0]
    for positions in client_schedule(len(samples), 1, 4, generator_for(7, 1, 0)):
        chosen = samples[positions[positions >= 0]]
        optimizer.zero_grad()
        F.cross_entropy(net(one.inputs(chosen)), one.y[chosen]).backward()
        optimizer.step()
    for name, value in net.named_parameters():
        torch.testing.assert_close(result.state["params"][name], value.detach(), atol=1e-6, rtol=1e-5, msg=name)


# ---------------------------------------------------------------- uploads, the per-client store, the hook


class Recorder:
    """A FedAvg that records what the engine hands it: each local result, the store, the hook's view."""

    NAME = "recorder"
    HYPERPARAMS: dict = {}

    def __init__(self):
        self.locals, self.views, self.contexts = [], [], []

    def init_state(self, params, num_clients, hp):
        return {"params": params}

    def shared_context(self, state, hp):
        return {}

    def client_context(self, state, client, hp):
        seen = state["clients"].get(client)
        self.contexts.append((client, None if seen is None else seen["steps"]))
        return {}

    def penalty(self, params, shared, ctx, hp):
        return torch.zeros(())

    def penalty_affine(self, shared, ctx, hp):
        return None

    def client_upload(self, local, hp):
        self.locals.append(local)
        return {"params": local.params, "steps": local.steps}

    def remember(self, upload, hp):
        return {"steps": upload["steps"]}

    def sent_down(self, hp):
        return ()

    def sent_up(self, hp):
        return ("params",)

    def aggregate(self, state, uploads, weights, hp):
        return fedavg.aggregate(state, uploads, weights, hp)

    def after_aggregate(self, state, view, hp):
        self.views.append(view.forgettable.clone())
        return state


def test_uploads_see_steps_start_and_data_and_the_store_reaches_the_next_round():
    recorder = Recorder()
    algorithm = as_algorithm(recorder)  # the hooks the engine calls: the recorder's own methods
    data = make_data((6, 9, 5))
    model = build("mlp_200")
    state = initial_state(model, algorithm, 3, {})
    start = {n: v.clone() for n, v in state["params"].items()}
    first = run_round(model, algorithm, {}, state, data, settings(), 1)
    run_round(model, algorithm, {}, first.state, data, settings(), 2)
    # B = 4, E = 2: ceil(n/4) steps per epoch.
    assert [local.steps for local in recorder.locals[:3]] == [4, 6, 4]
    for local in recorder.locals[:3]:
        assert all(torch.equal(local.start[n], start[n]) for n in start)
        assert torch.equal(local.train_index, data.clients[local.client])
    assert first.state["clients"] == {0: {"steps": 4}, 1: {"steps": 6}, 2: {"steps": 4}}
    assert recorder.contexts[:3] == [(0, None), (1, None), (2, None)]
    assert recorder.contexts[3:] == [(0, 4), (1, 6), (2, 4)]
    assert len(recorder.views) == 2 and recorder.views[0].shape == (3,)


def test_fedcurv_keeps_its_last_uploads_in_the_engines_store():
    hp = {**fedcurv.HYPERPARAMS, "lambda": 0.1, "fisher_samples": 3}
    result = one_round("mlp_200", fedcurv, hp, run_settings=settings(client_fraction=0.67))[0]
    assert sorted(result.state["clients"]) == result.cohort == result.state["summed"]
    assert set(result.state["clients"][result.cohort[0]]) == {"fisher", "fisher_params", "fisher_params2"}


# ---------------------------------------------------------------- the probes against per-sample loops


def accuracy_by_loop(model, params, data, index):
    """One sample at a time through a plain module: the independent reference."""
    import copy

    net = copy.deepcopy(model)
    net.load_state_dict(params, strict=False)
    net.eval()
    with torch.no_grad():
        right = [int(net(data.inputs(i.view(1))).argmax(1)) == int(data.y[i]) for i in index]
    return sum(right) / len(right)


def test_local_forgetting_and_forgettable_counts_match_per_sample_loops():
    data = label_skewed_data()
    result, model, _, state = one_round("mlp_200", data=data, probe=True, run_settings=settings(lr=0.3))
    view = result.view
    record = view.local_forgetting([0, 1, 2])
    for k in range(3):
        prior = accuracy_by_loop(model, state["params"], data, data.held_out(k))
        assert float(record["prior"][k]) == pytest.approx(prior)
        for i in range(3):
            post = accuracy_by_loop(model, view.locals[i].params, data, data.held_out(k))
            assert float(record["post"][k, i]) == pytest.approx(post)
            assert float(record["difference"][k, i]) == pytest.approx(post - prior)
    # Forgettable: right under the local model, wrong under the new global one, sample by sample.
    for c, local in enumerate(view.locals):
        by_loop = 0
        for i in data.clients[local.client]:
            right_local = accuracy_by_loop(model, local.params, data, i.view(1)) == 1.0
            right_global = accuracy_by_loop(model, result.state["params"], data, i.view(1)) == 1.0
            by_loop += right_local and not right_global
        assert int(view.forgettable[c]) == by_loop
    per_client = view.global_accuracy_per_client()
    for k in range(3):
        assert float(per_client[k]) == pytest.approx(
            accuracy_by_loop(model, result.state["params"], data, data.held_out(k))
        )


def test_probe_positions_follow_a_fixed_sample_of_clients():
    cohort = list(range(0, 40, 2))
    first = probe_positions(cohort, 40, 5, seed=3)
    assert len(first) == 5 and first == sorted(first)
    assert probe_positions(cohort, 40, 5, seed=3) == first
    assert probe_positions(cohort[:4], 40, 5, seed=3) == [0, 1, 2, 3]
    # A later cohort holding the same clients, and others the fixed order ranks after them (here: the
    # first cohort's unchosen members), probes the same ones.
    chosen = {cohort[p] for p in first}
    later = sorted(chosen | set(cohort[p] for p in range(0, len(cohort), 3) if p not in first))
    assert {later[p] for p in probe_positions(later, 40, 5, seed=3)} == chosen


# ---------------------------------------------------------------- example-forgetting events over presentations


def presentations_by_loop(model, state, data, client, rounds, run):
    """One client trained by plain torch on the engine's batch order from the global model (with one
    client, FedAvg's next global model is that client's), each batch's correctness read from the forward
    pass before its step; the events counted with the oracle (tests/oracles.py) on the dense [T, N]
    record, per example in the client's own order. Returns (total, per-example counts)."""
    import copy

    from pipeline.clientdata import client_schedule, generator_for
    from support.oracles import forgetting_events

    net = copy.deepcopy(model)
    net.load_state_dict(state["params"], strict=False)
    net.train()
    optimizer = torch.optim.SGD(net.parameters(), lr=run.local.optimizer.lr)
    samples = data.clients[client]
    seen = [[] for _ in samples]
    for round_ in range(1, rounds + 1):
        for positions in client_schedule(
            len(samples), run.local.epochs, run.local.batch_size, generator_for(run.seed, round_, client)
        ):
            positions = positions[positions >= 0]
            chosen = samples[positions]
            optimizer.zero_grad()
            logits = net(data.inputs(chosen))
            for p, right in zip(positions.tolist(), (logits.argmax(1) == data.y[chosen]).tolist()):
                seen[p].append(right)
            F.cross_entropy(logits, data.y[chosen]).backward()
            optimizer.step()
    per_example = forgetting_events(torch.tensor(seen).T)
    return int(per_example.sum()), per_example.tolist()


@pytest.mark.parametrize("vectorized", [True, False])
def test_example_events_of_a_centralised_run_match_a_per_presentation_loop(vectorized):
    """Three epochs a round, two rounds: every example presented six times; the engine's streamed count
    equals the count from a plain torch loop on the same batches, on both paths."""
    data = synthetic.make_data([23], shape=IMAGE, classes=CLASSES, seed=3)
    run = settings(local_epochs=3, batch_size=5, lr=0.5, example_events=True)
    model = build("mlp_200")
    state = initial_state(model, fedavg, 1, {})
    total = 0
    current = state
    for round_ in (1, 2):
        result = run_round(model, fedavg, {}, current, data, run, round_, vectorized=vectorized)
        total += result.example_events
        current = result.state
    expected = presentations_by_loop(model, state, data, 0, 2, run)[0]
    assert expected > 0, "the case must hold events to test anything"
    assert total == expected
    assert int(current["presentations"][0]["forgets"].sum()) == expected


@pytest.mark.parametrize("vectorized, max_chunk", [(True, None), (True, 1), (False, None)])
def test_example_events_per_example_of_a_federated_round_match_per_client_loops(vectorized, max_chunk):
    """Three clients of shuffled, non-contiguous samples, one round of four epochs: each client's
    per-example forgetting counts (not only the totals) equal a plain torch loop's for that client
    trained alone from the same global model, whatever the path or chunking."""
    data = synthetic.make_data([11, 17, 8], shape=IMAGE, classes=CLASSES, seed=5)
    run = settings(local_epochs=4, batch_size=3, lr=0.5, example_events=True)
    model = build("mlp_200")
    state = initial_state(model, fedavg, 3, {})
    result = run_round(model, fedavg, {}, state, data, run, 1, vectorized=vectorized, max_chunk=max_chunk)
    total = 0
    for client in range(3):
        events, per_example = presentations_by_loop(model, state, data, client, 1, run)
        assert result.state["presentations"][client]["forgets"].tolist() == per_example, client
        total += events
    assert total > 0 and result.example_events == total


def test_example_events_turn_the_hand_written_mlp_path_off_and_are_off_by_default():
    from pipeline.cohort import CohortJob, by_hand_applies, fused_sgd_applies
    from pipeline.optimizers import SGD

    result = one_round("mlp_200")[0]
    assert result.example_events is None and "presentations" not in result.state
    model = build("mlp_200")
    job = dict(
        model=model,
        algorithm=fedavg,
        hp={},
        data=None,
        optimizer=SGD(lr=0.1),
        shared={},
        contexts={},
        index=None,
        weight=None,
        keep=None,
        dropout=None,
    )
    assert by_hand_applies(CohortJob(**job)) and fused_sgd_applies(CohortJob(**job), None)
    assert not by_hand_applies(CohortJob(**job, record_correct=True))
    assert not fused_sgd_applies(CohortJob(**job, record_correct=True), None)


@pytest.mark.parametrize("vectorized", [True, False])
def test_example_events_with_a_client_holding_no_samples(vectorized):
    """A partition may leave a client empty (a cluster scheme with more clients than samples): it
    presents nothing and forgets nothing, and the others' counts are still their loops' counts."""
    data = synthetic.make_data([11, 0, 8], shape=IMAGE, classes=CLASSES, seed=5)
    run = settings(local_epochs=4, batch_size=3, lr=0.5, example_events=True)
    model = build("mlp_200")
    state = initial_state(model, fedavg, 3, {})
    result = run_round(model, fedavg, {}, state, data, run, 1, vectorized=vectorized)
    total = 0
    for client in (0, 2):
        events, per_example = presentations_by_loop(model, state, data, client, 1, run)
        assert result.state["presentations"][client]["forgets"].tolist() == per_example, client
        total += events
    assert result.state["presentations"][1]["forgets"].numel() == 0
    assert result.example_events == total
