"""FedAvg (McMahan et al. 2017): plain local SGD, the server averages parameters weighted by sample count."""
from __future__ import annotations

from pipeline.algorithms import common

NAME = "fedavg"
HYPERPARAMS: dict = {}

init_state = common.params_state
shared_context = common.no_shared_context
client_context = common.no_client_context
penalty = common.no_penalty
penalty_affine = common.no_penalty_affine
client_upload = common.params_upload
aggregate = common.sample_weighted_average


def check(path, hp):
    return []


def sent_down(hp):
    """Server-state entries sent to each client besides the parameters."""
    return ()


def sent_up(hp):
    """Upload entries that travel to the server."""
    return ("params",)
