"""A run's settings: the one schema of its keys (default, allowed values) and the typed parts each layer
of training takes, built from the resolved settings of one (run, seed).

    RunSettings                      pipeline.training: the whole run (its outputs, checkpoints, loop)
      .data       DataSettings          training.load_client_data: which data, its partition, input scaling
      .model      ModelSettings         models.build_model: which network
      .round      RoundSettings         rounds.run_round: one communication round (its `seed` keys every draw)
        .local    LocalTraining           what each client does: epochs, batches, loss, augmentation
          .optimizer OptimizerSettings      optimizers.build_optimizer: the client optimiser
      .schedule   Schedule              training: how many rounds, evaluation, targets, checkpoints
      .probes     ProbeSettings         training.probe_round: the forgetting probes
      .algorithm  dict                  the algorithm module's hyperparameters (`hp`), as resolved
      .record     dict                  the resolved settings themselves, written as settings.json and
                                        hashed into the checkpoint key, so both stay what they were

Each field of a part names the run key it is read from (`key(...)`, in its metadata, with the key's
default and what it allows): `RUN_DEFAULTS` and `RUN_REQUIRED` (pipeline.runs validates and resolves with
them) and every part's construction (`from_resolved`) are derived from these fields, so a new setting is
one field here. Nothing is checked when a part is built: the resolve stage has validated every value and
filled in every default before a train stage reads them. No torch here: validation imports this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REQUIRED = object()  # a key every run must set (no default)

# The values some keys allow, here (torch-free) so that validating params.yaml needs no torch; the modules
# that implement them check that they implement exactly these (tests/unit/test_settings.py).
MODEL_NAMES = (
    "mlp_200",
    "mlp_200_200",
    "cnn_mnist",
    "cnn_fedavg",
    "cnn_fedavg_bn",
    "cnn_small",
    "resnet18",
    "resnet_shallow",
    "resnet_shallow_small",
    "densenet121",
)
# The models with a `norm` option, and the norms each takes (the first is its default).
MODEL_NORMS = {
    "cnn_small": ("group", "batch", "none"),
    "resnet18": ("group", "batch"),
    "resnet_shallow": ("batch", "group"),
    "resnet_shallow_small": ("batch", "group"),
}
MODEL_MIN_SIDE = {
    "cnn_mnist": 6,
    "cnn_fedavg": 4,
    "cnn_fedavg_bn": 4,
    "cnn_small": 4,
    "resnet18": 8,
    "resnet_shallow": 8,
    # a stride-2 stem and three stride-2 blocks: 8x8 images reach the last block as 1x1 maps,
    # and BatchNorm cannot normalise a short last batch of one sample there
    "resnet_shallow_small": 16,
    "densenet121": 8,
}
# What `freeze` can hold fixed (neither trained nor averaged): the FedWAvg paper's Figure 3.
FREEZES = ("none", "classifier")
LOSSES = ("ce", "tce")
OPTIMIZERS = ("sgd", "adam")
INPUT_SCALINGS = ("standardize", "unit")
AUGMENTATIONS = ("none", "crop_flip")
EVALUATION_SETS = ("test", "validation", "test_seen_classes")


def model_fits(name: str, image_shape) -> str | None:
    """Why the model cannot take this input shape (height, width, channels), or None if it can."""
    height, width, _ = image_shape
    if min(height, width) < MODEL_MIN_SIDE.get(name, 1):
        side = MODEL_MIN_SIDE[name]
        return f"needs images of at least {side}x{side}, got {height}x{width}"
    return None


def key(name: str, default: Any = REQUIRED, allowed: tuple | None = None):
    """A field read from run key `name`, with its default (REQUIRED: none) and allowed values."""
    return field(metadata={"key": name, "default": default, "allowed": allowed})


def build(cls, resolved: Mapping[str, Any]):
    """A part from resolved settings: each field from its key, a field that is itself a part built the
    same way from the same settings."""
    values = {}
    for item in dataclasses.fields(cls):
        if "part" in item.metadata:
            values[item.name] = build(item.metadata["part"], resolved)
        else:
            value = resolved[item.metadata["key"]]
            values[item.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


def part(cls):
    """A field holding a part (built from the same resolved settings)."""
    return field(metadata={"part": cls})


@dataclass(frozen=True)
class DataSettings:
    """What a run trains and evaluates on."""

    dataset: str = key("dataset")  # filled in by the resolve stage from the partition
    dataset_options: dict = key("dataset_options")  # the dataset's size overrides (params' datasets.<name>)
    partition: str = key("partition")
    input_scaling: str = key("input_scaling", "standardize", INPUT_SCALINGS)


@dataclass(frozen=True)
class ModelSettings:
    """The network a run trains."""

    name: str = key("model", REQUIRED, MODEL_NAMES)
    norm: str | None = key("norm", None)  # the norm of a model that offers one (MODEL_NORMS); None: its default


@dataclass(frozen=True)
class OptimizerSettings:
    """The client optimiser: SGD (lr, momentum, weight_decay) or Adam (lr, betas, eps, weight_decay)."""

    name: str = key("optimizer", "sgd", OPTIMIZERS)
    lr: float = key("lr")
    momentum: float = key("momentum", 0.0)
    weight_decay: float = key("weight_decay", 0.0)
    betas: tuple[float, float] = key("betas", [0.9, 0.999])
    eps: float = key("eps", 1.0e-8)


@dataclass(frozen=True)
class LocalTraining:
    """What each sampled client does in a round."""

    epochs: int = key("local_epochs")
    batch_size: int = key("batch_size")
    loss: str = key("loss", "ce", LOSSES)
    augment: str = key("augment", "none", AUGMENTATIONS)  # crop_flip: random crop (padding 4) + horizontal flip
    optimizer: OptimizerSettings = part(OptimizerSettings)


@dataclass(frozen=True)
class RoundSettings:
    """Everything one communication round depends on besides the model, the algorithm and the data."""

    seed: int = key("seed")  # keys every random draw (clientdata.generator_for): set per seed, not in params
    client_fraction: float = key("client_fraction")  # C: the share of clients sampled each round
    local: LocalTraining = part(LocalTraining)
    freeze: str = key("freeze", "none", FREEZES)  # classifier: the last linear layer neither trained nor averaged
    example_events: bool = key("example_events", False)  # count example-forgetting events (Toneva et al.)


@dataclass(frozen=True)
class Schedule:
    """The run's course: its rounds, when and on what the global model is evaluated, the accuracies
    whose first round is reported, and how often the state is checkpointed."""

    rounds: int = key("rounds")
    eval_every: int = key("eval_every", 1)
    evaluate_on: str = key("evaluate_on", "test", EVALUATION_SETS)  # training.curve_set
    targets: tuple[float, ...] = key("targets", [])
    checkpoint_every: int = key("checkpoint_every", 10)


@dataclass(frozen=True)
class ProbeSettings:
    """The forgetting probes (pipeline.forgetting): when, and of how many clients."""

    rounds: tuple[int, ...] = key("probe_rounds", [])  # local client forgetting and per-client accuracy
    clients: int = key("probe_clients", 10)  # at most this many cohort clients in a probe
    forgettable_every: int = key("forgettable_every", 0)  # forgettable examples every t rounds (0: never)


# Keys that are no field of a part: read by the resolve stage and the reports, or the run's own list.
OTHER_KEYS = {"paper": None, "algorithm": REQUIRED, "seeds": [0], "note": ""}
PARTS = (DataSettings, ModelSettings, OptimizerSettings, LocalTraining, RoundSettings, Schedule, ProbeSettings)
RESOLVED_ONLY = ("dataset", "dataset_options", "seed")  # filled in by resolve / per seed, never in params.yaml


def run_keys() -> dict[str, Any]:
    """Every run key params.yaml may set and its default (REQUIRED: none), derived from the parts' fields."""
    keys = dict(OTHER_KEYS)
    for cls in PARTS:
        for item in dataclasses.fields(cls):
            if "key" in item.metadata and item.metadata["key"] not in RESOLVED_ONLY:
                keys[item.metadata["key"]] = item.metadata["default"]
    return keys


def allowed_values() -> dict[str, tuple]:
    """The keys whose values are one of a list: key -> the list."""
    return {
        item.metadata["key"]: item.metadata["allowed"]
        for cls in PARTS
        for item in dataclasses.fields(cls)
        if item.metadata.get("allowed")
    }


RUN_DEFAULTS = {name: default for name, default in run_keys().items() if default is not REQUIRED}
RUN_REQUIRED = tuple(name for name, default in run_keys().items() if default is REQUIRED)


def seed_key(run: str, seed: int) -> str:
    """The id of one (run, seed): its results folder, checkpoint and model names."""
    return f"{run}-seed{seed}"


def seed_settings(settings: dict, seed: int) -> dict:
    """A run's resolved settings for one of its seeds."""
    return {**settings, "seed": seed, "key": seed_key(settings["run"], seed)}


@dataclass(frozen=True)
class RunSettings:
    """One (run, seed) as the train stage trains it."""

    run: str
    data: DataSettings
    model: ModelSettings
    round: RoundSettings
    schedule: Schedule
    probes: ProbeSettings
    algorithm: dict  # name and hyperparameters, handed to the algorithm module as they are
    record: dict  # the resolved settings plus seed and key: settings.json, and the checkpoint key's input

    @property
    def seed(self) -> int:
        return self.round.seed

    @property
    def key(self) -> str:
        """The (run, seed)'s id: its results folder, checkpoint and model names (`seed_key`)."""
        return self.record["key"]

    @classmethod
    def from_resolved(cls, resolved: Mapping[str, Any], seed: int) -> RunSettings:
        """The settings of one seed of a run, from its resolved settings (resolved/<run>.json)."""
        record = seed_settings(dict(resolved), seed)
        return cls(
            record["run"],
            build(DataSettings, record),
            build(ModelSettings, record),
            build(RoundSettings, record),
            build(Schedule, record),
            build(ProbeSettings, record),
            record["algorithm"],
            record,
        )
