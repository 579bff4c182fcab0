"""The package's algorithms as the engine calls them (pipeline.algorithms.get_algorithm: every hook, the
defaults filled in), under their names, for tests that use one directly; a module's other names (helpers
such as FedCurv's `upload_from`) are read through to the module."""

from __future__ import annotations

from pipeline.algorithms import get_algorithm


class Complete:
    def __init__(self, name: str):
        self.__dict__.update(vars(get_algorithm(name)))

    def __getattr__(self, name: str):  # not a hook: the module's own
        return getattr(self.module, name)


fedavg = Complete("fedavg")
fedprox = Complete("fedprox")
fedcurv = Complete("fedcurv")
importance = Complete("importance")
scaffold = Complete("scaffold")
fednova = Complete("fednova")
fedwavg = Complete("fedwavg")
