"""FedAvg (McMahan et al. 2017): plain local SGD, the server averages parameters weighted by sample count."""
from __future__ import annotations

import torch

from pipeline.algorithms.common import weighted_sum

NAME = "fedavg"
HYPERPARAMS: dict = {}


def check(path, hp):
    return []


def sent_down(hp):
    """Server-state entries sent to each client besides the parameters."""
    return ()


def sent_up(hp):
    """Upload entries that travel to the server."""
    return ("params",)


def init_state(global_params, num_clients, hp):
    return {"params": global_params}


def shared_context(state, hp):
    return {}


def client_context(state, client, hp):
    return {}


def penalty(params, shared, ctx, hp):
    return torch.zeros(())


def penalty_affine(shared, ctx, hp):
    return None


def client_upload(local, hp):
    return {"params": local.params}


def upload_from(params, fisher, hp, shared=None):
    return {"params": params}


def aggregate(state, uploads, weights, hp):
    return {**state, "params": weighted_sum(uploads, weights, "params")}
