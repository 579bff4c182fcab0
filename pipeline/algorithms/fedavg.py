"""FedAvg (McMahan et al. 2017): plain local SGD, the server averages parameters weighted by sample count.

Every hook is the interface's default (pipeline.algorithms.Algorithm), which is FedAvg's own."""

from __future__ import annotations

NAME = "fedavg"
