"""RWalk's path-integral score (Chaudhry et al. 2018), observed along each client's local trajectory.

The engine knows nothing of RWalk: an algorithm that wants the score returns a factory of this tracker
from `local_tracker(hp)`; the engine calls `update` after every local step and hands each client's
`client_result` to its upload as `LocalResult.tracked`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pipeline.optimizers import active_on_host


class PathScore:
    """RWalk's path-integral importance (Chaudhry et al. 2018), accumulated step by step:

        s ← s + max(0, −g·Δθ) / (½·F̂·Δθ² + ε),     F̂ ← decay·F̂ + (1 − decay)·g²   (F̂ = g² at first)

    g being the data loss's gradient at the step, Δθ the step taken and F̂ a running Fisher from the
    squared mini-batch gradients: the loss decrease each parameter's move bought, per unit of the
    curvature it moved along. Works on stacked cohorts (`active` masks finished clients) and on one
    client (`active` None: it steps; or a scalar True). Which clients have started is also kept on the
    host, so that choosing the common case never waits for a GPU."""

    def __init__(self, decay: float, epsilon: float):
        self.decay, self.epsilon = decay, epsilon
        self.score: dict = {}
        self.running_fisher: dict = {}
        self.started: torch.Tensor | None = None  # which clients have taken a step (F̂ = g² at their first)
        self.started_host: list[bool] | None = None  # the same on the host
        self.epsilon_as_tensor: torch.Tensor | None = None

    def update(
        self, grads: dict, steps: dict, active: torch.Tensor | None, active_host: Sequence[bool] | None = None
    ) -> None:
        """Add one step: `grads` the data loss's gradients, `steps` the Δθ taken (0 for inactive clients,
        so they gain no score; their running Fisher is left as it was). `active_host`: `active` as the
        host knows it (read from `active` when not given).

        In place, a few passes per tensor: on the MNIST MLP cohort this made RWalk's rounds 2.5x faster
        than building each term as a new tensor from parameter copies (11-12 s -> 4.7 s a round)."""
        stepped = active_on_host(active, active_host)
        if self.started_host is None:
            self.started_host = [False] * len(stepped)
            self.started = None if active is None else torch.zeros_like(active)
        steady = all(self.started_host) and all(stepped)  # the common case: one in-place pass
        first = None if steady or active is None else active & ~self.started  # type: ignore[operator]
        for name, g in grads.items():
            if name not in self.running_fisher:
                self.running_fisher[name] = torch.zeros_like(g)
                self.score[name] = torch.zeros_like(g)
            running = self.running_fisher[name]
            if steady:
                running.mul_(self.decay).addcmul_(g, g, value=1 - self.decay)
            elif active is None:  # one client's first step (it always steps): F̂ = g²
                running.copy_(g * g)
            else:
                shape = active.shape + (1,) * (g.dim() - active.dim())
                squared = g * g
                running.copy_(
                    torch.where(
                        first.reshape(shape),  # type: ignore[union-attr]
                        squared,
                        torch.where(active.reshape(shape), running * self.decay + (1 - self.decay) * squared, running),
                    )
                )
            # score += max(0, −g·Δθ) / (½·F̂·Δθ² + ε), written as min(0, g·Δθ) / (…) subtracted
            delta = steps[name]
            decrease = torch.mul(g, delta).clamp_max_(0)  # minus the loss decrease the move bought
            cost = torch.mul(delta, delta)
            torch.addcmul(self.epsilon_like(cost), cost, running, value=0.5, out=cost)
            self.score[name].addcdiv_(decrease, cost, value=-1.0)
        self.started_host = [before or now for before, now in zip(self.started_host, stepped)]
        if active is not None:
            self.started = self.started | active  # type: ignore[operator]

    def epsilon_like(self, like: torch.Tensor) -> torch.Tensor:
        if self.epsilon_as_tensor is None or self.epsilon_as_tensor.dtype != like.dtype:
            # made on the device (no copy from the host); the same rounding of ε as torch.tensor's
            self.epsilon_as_tensor = torch.full((), self.epsilon, dtype=like.dtype, device=like.device)
        return self.epsilon_as_tensor

    def client_result(self, c: int) -> dict:
        """Client c's path score, as its upload reads it."""
        return {"path_score": {name: value[c] for name, value in self.score.items()}}

    def set_client(self, c: int, client: PathScore, like: dict) -> None:
        """Put one client's score (sequential path) at position c of this stacked score."""
        for name, value in like.items():
            if name not in self.score:
                self.score[name] = torch.zeros_like(value)
            if name in client.score:
                self.score[name][c] = client.score[name]
