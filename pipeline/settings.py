"""A run's settings as the training engine reads them: built once, from the resolved settings of one
(run, seed), into the parts each layer of training depends on.

    RunSettings                      pipeline.train: the whole run (its outputs, checkpoints, loop)
      .data       DataSettings          train.load_client_data: which data, its partition, input scaling
      .model      ModelSettings         models.build_model: which network
      .round      RoundSettings         rounds.run_round: one communication round
        .local    LocalTraining           what each client does: epochs, batches, loss, augmentation
          .optimizer OptimizerSettings      optimizers.build_optimizer: the client optimiser
      .schedule   Schedule              train: how many rounds, evaluation, targets, checkpoints
      .probes     ProbeSettings         train.probe_round: the forgetting probes
      .algorithm  dict                  the algorithm module's hyperparameters (`hp`), as resolved
      .record     dict                  the resolved settings themselves, written as settings.json and
                                        hashed into the checkpoint key, so both stay what they were

Nothing is checked here: the resolve stage has validated every value and filled in every default
before a train stage reads them (pipeline.runs), so a part reads its keys as they are.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.inputs import seed_settings


@dataclass(frozen=True)
class DataSettings:
    """What a run trains and evaluates on."""
    dataset: str
    dataset_options: dict  # the dataset's size overrides (params' datasets.<name>), if any
    partition: str
    input_scaling: str  # clientdata.INPUT_SCALINGS

    @classmethod
    def from_resolved(cls, settings: Mapping[str, Any]) -> DataSettings:
        return cls(settings["dataset"], settings["dataset_options"], settings["partition"],
                   settings["input_scaling"])


@dataclass(frozen=True)
class ModelSettings:
    """The network a run trains."""
    name: str  # a models.MODELS key
    norm: str | None  # the normalisation layers of a model that offers a choice; None: its default

    @classmethod
    def from_resolved(cls, settings: Mapping[str, Any]) -> ModelSettings:
        return cls(settings["model"], settings["norm"])


@dataclass(frozen=True)
class OptimizerSettings:
    """The client optimiser: SGD (lr, momentum, weight_decay) or Adam (lr, betas, eps, weight_decay)."""
    name: str  # "sgd" or "adam"
    lr: float
    momentum: float
    weight_decay: float
    betas: tuple[float, float]
    eps: float

    @classmethod
    def from_resolved(cls, settings: Mapping[str, Any]) -> OptimizerSettings:
        beta1, beta2 = settings["betas"]
        return cls(settings["optimizer"], settings["lr"], settings["momentum"], settings["weight_decay"],
                   (beta1, beta2), settings["eps"])


@dataclass(frozen=True)
class LocalTraining:
    """What each sampled client does in a round."""
    epochs: int
    batch_size: int
    loss: str  # losses.LOSSES
    augment: str  # clientdata.AUGMENTATIONS
    optimizer: OptimizerSettings

    @classmethod
    def from_resolved(cls, settings: Mapping[str, Any]) -> LocalTraining:
        return cls(settings["local_epochs"], settings["batch_size"], settings["loss"], settings["augment"],
                   OptimizerSettings.from_resolved(settings))


@dataclass(frozen=True)
class RoundSettings:
    """Everything one communication round depends on besides the model, the algorithm and the data."""
    seed: int  # keys every random draw (clientdata.generator_for)
    client_fraction: float  # C: the share of clients sampled each round
    local: LocalTraining
    freeze: str  # models.frozen_parameters: parameters neither trained nor averaged
    example_events: bool  # record every presentation's correctness (example-forgetting events)

    @classmethod
    def from_resolved(cls, settings: Mapping[str, Any]) -> RoundSettings:
        return cls(settings["seed"], settings["client_fraction"], LocalTraining.from_resolved(settings),
                   settings["freeze"], settings["example_events"])


@dataclass(frozen=True)
class Schedule:
    """The run's course: its rounds, when and on what the global model is evaluated, the accuracies
    whose first round is reported, and how often the state is checkpointed."""
    rounds: int
    eval_every: int
    evaluate_on: str  # "test", "validation" or "test_seen_classes" (train.curve_set)
    targets: tuple[float, ...]
    checkpoint_every: int

    @classmethod
    def from_resolved(cls, settings: Mapping[str, Any]) -> Schedule:
        return cls(settings["rounds"], settings["eval_every"], settings["evaluate_on"], tuple(settings["targets"]),
                   settings["checkpoint_every"])


@dataclass(frozen=True)
class ProbeSettings:
    """The forgetting probes (pipeline.forgetting): when, and of how many clients."""
    rounds: tuple[int, ...]  # local client forgetting and per-client accuracy at these rounds
    clients: int  # at most this many cohort clients in a probe
    forgettable_every: int  # forgettable examples every t rounds (0: never)

    @classmethod
    def from_resolved(cls, settings: Mapping[str, Any]) -> ProbeSettings:
        return cls(tuple(settings["probe_rounds"]), settings["probe_clients"], settings["forgettable_every"])


@dataclass(frozen=True)
class RunSettings:
    """One (run, seed) as the train stage trains it."""
    run: str
    key: str  # the (run, seed)'s id: its stage, results folder and checkpoint name (inputs.seed_key)
    seed: int
    data: DataSettings
    model: ModelSettings
    round: RoundSettings
    schedule: Schedule
    probes: ProbeSettings
    algorithm: dict  # name and hyperparameters, handed to the algorithm module as they are
    record: dict  # the resolved settings plus seed and key: settings.json, and the checkpoint key's input

    @classmethod
    def from_resolved(cls, resolved: Mapping[str, Any], seed: int) -> RunSettings:
        """The settings of one seed of a run, from its resolved settings (resolved/<run>.json)."""
        record = seed_settings(dict(resolved), seed)
        return cls(record["run"], record["key"], seed, DataSettings.from_resolved(record),
                   ModelSettings.from_resolved(record), RoundSettings.from_resolved(record),
                   Schedule.from_resolved(record), ProbeSettings.from_resolved(record), record["algorithm"], record)
