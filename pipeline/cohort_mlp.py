"""A cohort of MLPs trained with explicit batched layers: one `bmm` per linear layer, for every client.

For the Linear/ReLU stacks (mlp_200, mlp_200_200) the engine skips `vmap(grad(...))` and computes each
client's gradient of its mean cross-entropy by hand: the forward pass is one `baddbmm` per layer over
stacked weights [clients, out, in], the backward pass two `bmm`s per layer. Same numbers as the vmap
objective (tests/test_engine.py compares both with the one-client-at-a-time reference), far fewer
operations per step: on this 2-core CPU this is what makes small batches (B = 10) cheap.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.losses import masked_logits


def is_plain_mlp(model) -> bool:
    """Flatten first, then only Linear and ReLU: the shape this module differentiates by hand."""
    layers = list(model) if isinstance(model, nn.Sequential) else []
    return (
        len(layers) > 1
        and isinstance(layers[0], nn.Flatten)
        and all(isinstance(m, (nn.Linear, nn.ReLU)) for m in layers[1:])
    )


def cohort_grads(model, stacked: dict, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, keep=None, share=None):
    """Per-client gradients of Σ_b w_b·CE_b / Σ_b w_b, and that loss; a client with no weight gets 0.

    stacked: name -> [clients, ...]; x: [clients, batch, ...] model input; y, w: [clients, batch];
    keep: [clients, classes] logit mask of the loss (TCE), or None for plain cross-entropy."""
    delta, data_loss, linear_inputs, relu_outputs = forward(model, stacked, x, y, w, keep, share)
    return backward(model, stacked, delta, linear_inputs, relu_outputs), data_loss


def cohort_sgd_step(
    model,
    stacked: dict,
    x: torch.Tensor,
    y: torch.Tensor,
    w: torch.Tensor,
    lr: float,
    pull: dict | None = None,
    keep=None,
    share=None,
):
    """One plain SGD step (no momentum or weight decay) applied during the backward pass:
    θ ← θ − lr·g as one `baddbmm_` per weight, never materialising g. Returns the data loss.

    `pull` (name -> (lr·scale, lr·offset)) adds a quadratic penalty whose gradient is scale·θ − offset
    (FedProx, FedCurv, EWC): θ ← θ − lr·scale·θ + lr·offset, taken at the same θ as g. A client with no
    weight in this step has g = 0 exactly (and a pull masked to 0), so it stays exactly where it was."""
    delta, data_loss, linear_inputs, relu_outputs = forward(model, stacked, x, y, w, keep, share)
    backward(model, stacked, delta, linear_inputs, relu_outputs, lr=lr, pull=pull)
    return data_loss


def is_zero_scale(scale) -> bool:
    """A penalty gradient's scale that is the float 0 (SCAFFOLD's constant correction): no pass over θ
    is needed for it, and the gradient sum can be read off the displacement (cohort.displacement_...)."""
    return isinstance(scale, float) and scale == 0.0


def apply_pull(param: torch.Tensor, scale, offset) -> None:
    """θ ← θ − scale·θ + offset in place (written so that a tiny scale is not lost to 1 − scale rounding);
    a scale of exactly 0 (SCAFFOLD's constant correction) costs no pass over θ."""
    if torch.is_tensor(scale):
        param.addcmul_(param, scale, value=-1.0)
    elif not is_zero_scale(scale):
        param.add_(param, alpha=-scale)
    param.add_(offset)


def sample_shares(w: torch.Tensor) -> torch.Tensor:
    """Each sample's share of its client's mean loss, w_b / Σ_b w_b (0 for a client with no weight);
    w: [..., clients, batch], so a whole schedule's shares can be taken at once."""
    return w / w.sum(-1, keepdim=True).clamp_min(1.0)


def forward(model, stacked, x, y, w, keep=None, share=None):
    """Logit gradients (softmax − one-hot, times each sample's share of its client's mean), the
    clients' mean losses, and what the backward pass needs: every Linear's input, every ReLU's output.
    share: sample_shares(w) if the caller has it (a cohort computes its schedule's at once)."""
    h = x.flatten(2)
    linear_inputs, relu_outputs = {}, {}
    for index, layer in enumerate(model):
        if isinstance(layer, nn.Linear):
            linear_inputs[index] = h
            weight, bias = stacked[f"{index}.weight"], stacked[f"{index}.bias"]
            h = torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))
        elif isinstance(layer, nn.ReLU):
            h = h.clamp_min(0)
            relu_outputs[index] = h
    log_prob = F.log_softmax(masked_logits(h, None if keep is None else keep.unsqueeze(1)), dim=-1)
    share = sample_shares(w) if share is None else share
    label = y.unsqueeze(-1)
    picked = log_prob.gather(-1, label).squeeze(-1)
    if keep is not None:  # padding may carry a label the TCE mask drops (log-probability -inf): select
        picked = torch.where(share > 0, picked, 0.0)
    data_loss = -(picked * share).sum(1)
    delta = log_prob.exp()
    delta.scatter_add_(-1, label, delta.new_full((1,) * label.dim(), -1.0).expand(label.shape))  # − one-hot
    return delta.mul_(share.unsqueeze(-1)), data_loss, linear_inputs, relu_outputs


def backward(
    model, stacked, delta, linear_inputs, relu_outputs, lr: float | None = None, pull: dict | None = None
) -> dict:
    """The gradients (lr None), or the SGD step applied in place (lr given; returns {})."""
    grads = {}
    layers = list(model)
    for index in range(len(layers) - 1, 0, -1):
        if isinstance(layers[index], nn.Linear):
            weight, bias = stacked[f"{index}.weight"], stacked[f"{index}.bias"]
            below = torch.bmm(delta, weight) if index > 1 else None  # before the weight moves
            if lr is None:
                grads[f"{index}.weight"] = torch.bmm(delta.transpose(1, 2), linear_inputs[index])
                grads[f"{index}.bias"] = delta.sum(1)
            else:
                if pull is not None:  # the penalty's pull, at the θ the data gradient was taken at
                    apply_pull(weight, *pull[f"{index}.weight"])
                    apply_pull(bias, *pull[f"{index}.bias"])
                weight.baddbmm_(delta.transpose(1, 2), linear_inputs[index], alpha=-lr)
                bias.add_(delta.sum(1), alpha=-lr)
            delta = below
        else:  # ReLU: the gradient passes where the unit was active
            delta = torch.ops.aten.threshold_backward(delta, relu_outputs[index], 0)
    return grads
