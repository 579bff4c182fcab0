"""The networks the papers use, built from a name and the dataset's image shape and class count.

| name          | what                                                   | used by             |
|---------------|--------------------------------------------------------|---------------------|
| mlp_200       | 784-200-10 (input flattened), ReLU                     | Importance, FedAvg  |
| mlp_200_200   | 784-200-200-10 (McMahan et al.'s 2NN)                  | FedAvg paper        |
| cnn_mnist     | PyTorch's MNIST example: conv32-conv64-maxpool-fc128, dropouts 0.25/0.5 | FedCurv |
| cnn_fedavg    | McMahan et al.'s CNN: 5x5 conv32, pool, 5x5 conv64, pool, fc512        | Importance |

| cnn_fedavg_bn | cnn_fedavg with BatchNorm after each convolution                       | BatchNorm runs  |
| cnn_small     | 3x3 stride-2 conv16, conv32, fc64, a norm after each conv (`norm`)     | TCE, default profile |
| resnet18      | ResNet-18 for 32x32 inputs (3x3 stride-1 stem, no max-pool, widths 64-512), `norm` | TCE, paper profile |
| resnet_shallow | the FedWAvg paper's "shallower ResNet": stem, four BasicBlocks (64-512), GAP, fc, `norm` | FedWAvg, paper profile |
| resnet_shallow_small | the same blocks at a quarter of the widths (16-128), stride-2 stem | FedWAvg, default profile |
| densenet121   | torchvision's DenseNet-121, stem adapted to 28x28 / 32x32 inputs         | FedWAvg Table 1, paper profile |

`norm` (a run setting) picks the normalisation of the models that offer one (settings.MODEL_NORMS, first =
default):
`group` is GroupNorm with 2 groups (the TCE authors' default; no running statistics, so nothing but
parameters to average), `batch` is BatchNorm (running statistics carried by the server).

Dropout is `KeyedDropout`: its mask is an input (a buffer the engine supplies through functional_call),
drawn from the client's own (seed, round, client) generator, so a dropout model gives the same numbers
on the vectorized and the sequential path and for any cohort chunking. BatchNorm is `KeyedBatchNorm2d`:
its running statistics are buffers the server carries and averages like parameters, and on the
vectorized path, where each client's batch is padded to the cohort's longest, it is told which samples
are present (the buffer `present`), so each client's statistics come from its own real samples only.
"""

from __future__ import annotations

import torch
from torch import nn


def mlp(image_shape, classes, hidden):
    height, width, channels = image_shape
    sizes = [height * width * channels, *hidden]
    layers: list[nn.Module] = [nn.Flatten()]
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    layers.append(nn.Linear(sizes[-1], classes))
    return nn.Sequential(*layers)


class KeyedDropout(nn.Module):
    """Inverted dropout whose mask is supplied by the caller as the buffer `mask` ([batch, *features],
    already scaled by 1/(1 − p)); without one (a plain forward in train mode) it falls back to
    torch's own dropout."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p
        self.register_buffer("mask", torch.empty(0), persistent=False)

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if self.mask.numel() == 0:  # type: ignore[operator]
            return nn.functional.dropout(x, self.p, training=True)
        return x * self.mask


class KeyedBatchNorm2d(nn.BatchNorm2d):
    """torch's BatchNorm2d, told which samples of its batch are real when the caller supplies the buffer
    `present` ([batch], 1 real, 0 padding): the vectorized path, whose clients' batches are padded to
    the longest and whose finished clients still pass a batch. The batch statistics are then the present
    samples' alone, and a batch with none leaves the running statistics (and `num_batches_tracked`) as
    they were. Without `present` (the sequential path, which drops padding instead, and evaluation) it
    is torch's own BatchNorm2d, number for number."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.register_buffer("present", torch.empty(0), persistent=False)

    def forward(self, x):
        if not self.training and self.track_running_stats and x.is_cuda:
            return self.normalise_with_running_statistics(x)
        if not self.training or self.present.numel() == 0:  # type: ignore[operator]
            return super().forward(x)
        present = self.present.to(x.dtype).reshape(-1, *([1] * (x.dim() - 1)))  # type: ignore[operator]
        dims = [0, *range(2, x.dim())]
        count = self.present.to(x.dtype).sum() * x[0, 0].numel()  # type: ignore[operator]  # values per channel
        channel = (1, -1, *([1] * (x.dim() - 2)))
        mean = (x * present).sum(dims) / count.clamp_min(1.0)
        centred = x - mean.reshape(channel)
        variance = (centred * centred * present).sum(dims) / count.clamp_min(1.0)  # biased, as BatchNorm's
        out = centred * torch.rsqrt(variance + self.eps).reshape(channel)
        if self.affine:
            out = out * self.weight.reshape(channel) + self.bias.reshape(channel)
        # Padding passes through (so shapes stay the cohort's) but must steer nothing: no gradient.
        out = torch.where(present > 0, out, out.detach())
        if self.track_running_stats:
            self.update_running_statistics(mean.detach(), variance.detach(), count)
        return out

    def normalise_with_running_statistics(self, x):
        """Evaluation as the affine map it is, in elementwise operations. On CUDA, torch.batch_norm under
        vmap (the cohort's evaluation, one model per client) stops with "NYI: querying is_contiguous inside
        of vmap" (torch 2.11, H200); the CPU keeps torch's own kernel, so CPU results stay bit for bit."""
        channel = (1, -1, *([1] * (x.dim() - 2)))
        scale = torch.rsqrt(self.running_var + self.eps)  # type: ignore[arg-type, operator]
        shift = -self.running_mean * scale  # type: ignore[operator]
        if self.affine:
            scale, shift = scale * self.weight, shift * self.weight + self.bias
        return x * scale.reshape(channel) + shift.reshape(channel)

    def update_running_statistics(self, mean, variance, count) -> None:
        """BatchNorm's update (unbiased variance; momentum None = the cumulative mean), only if any sample
        was present; in place, so that it also reaches a stacked buffer under vmap."""
        some = count > 0
        tracked = self.num_batches_tracked + some.to(self.num_batches_tracked.dtype)  # type: ignore[union-attr]
        factor = 1.0 / tracked.clamp_min(1).to(mean.dtype) if self.momentum is None else self.momentum
        unbiased = variance * count / (count - 1).clamp_min(1.0)
        self.running_mean.copy_(torch.where(some, (1 - factor) * self.running_mean + factor * mean, self.running_mean))  # type: ignore[arg-type, operator, union-attr]
        self.running_var.copy_(torch.where(some, (1 - factor) * self.running_var + factor * unbiased, self.running_var))  # type: ignore[arg-type, operator, union-attr]
        self.num_batches_tracked.copy_(tracked)  # type: ignore[union-attr]


def keyed_batch_norms(model: nn.Module) -> nn.Module:
    """Every BatchNorm2d of the model (torchvision's DenseNet's included) made a KeyedBatchNorm2d with the
    same settings and state, in place: one swap here rather than a norm argument in every builder."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.BatchNorm2d:
                keyed = KeyedBatchNorm2d(
                    child.num_features, child.eps, child.momentum, child.affine, child.track_running_stats
                )
                keyed.load_state_dict(child.state_dict())
                setattr(module, name, keyed)
    return model


def cnn_mnist(image_shape, classes):
    """github.com/pytorch/examples mnist/main.py's Net (FedCurv's model), sized from the input."""
    height, width, channels = image_shape
    flat = 64 * ((height - 4) // 2) * ((width - 4) // 2)
    return nn.Sequential(
        nn.Conv2d(channels, 32, 3),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        KeyedDropout(0.25),
        nn.Flatten(),
        nn.Linear(flat, 128),
        nn.ReLU(),
        KeyedDropout(0.5),
        nn.Linear(128, classes),
    )


def cnn_fedavg(image_shape, classes):
    """McMahan et al. 2017's CNN: two 5x5 convs (32, 64), each followed by 2x2 max-pooling, fc512."""
    height, width, channels = image_shape
    flat = 64 * (height // 4) * (width // 4)
    return nn.Sequential(
        nn.Conv2d(channels, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 512),
        nn.ReLU(),
        nn.Linear(512, classes),
    )


def cnn_fedavg_bn(image_shape, classes):
    """cnn_fedavg with BatchNorm after each convolution (running statistics carried by the server)."""
    height, width, channels = image_shape
    flat = 64 * (height // 4) * (width // 4)
    return nn.Sequential(
        nn.Conv2d(channels, 32, 5, padding=2),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 512),
        nn.ReLU(),
        nn.Linear(512, classes),
    )


def norm_layer(norm: str, channels: int) -> nn.Module:
    if norm == "group":
        return nn.GroupNorm(2, channels)
    if norm == "batch":
        return nn.BatchNorm2d(channels)
    return nn.Identity()


def cnn_small(image_shape, classes, norm="group"):
    """A small CNN for the default profile's TCE runs, small enough for a CPU: two 3x3 stride-2 convs
    (16, 32 channels), each followed by the norm and ReLU, then fc64 and the classifier. Strided
    convolutions in place of conv + 2x2 max-pooling: on this 2-core CPU a step of 64 CIFAR images
    took 3.3 ms against 27 ms with max-pooling (max-pooling and the elementwise ops on the full-size
    maps were 70 % of it)."""
    height, width, channels = image_shape
    flat = 32 * (-(-height // 4)) * (-(-width // 4))
    return nn.Sequential(
        nn.Conv2d(channels, 16, 3, stride=2, padding=1),
        norm_layer(norm, 16),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        norm_layer(norm, 32),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(flat, 64),
        nn.ReLU(),
        nn.Linear(64, classes),
    )


class BasicBlock(nn.Module):
    """He et al.'s two-conv residual block; a 1x1 conv + norm shortcut where the shape changes."""

    def __init__(self, fan_in: int, fan_out: int, stride: int, norm: str):
        super().__init__()
        self.conv1 = nn.Conv2d(fan_in, fan_out, 3, stride=stride, padding=1, bias=False)
        self.norm1 = norm_layer(norm, fan_out)
        self.conv2 = nn.Conv2d(fan_out, fan_out, 3, padding=1, bias=False)
        self.norm2 = norm_layer(norm, fan_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or fan_in != fan_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(fan_in, fan_out, 1, stride=stride, bias=False), norm_layer(norm, fan_out)
            )

    def forward(self, x):
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


def resnet18(image_shape, classes, norm="group"):
    """ResNet-18 for small images (the CIFAR variant the TCE authors use): 3x3 stride-1 stem, no
    max-pool, four stages of two BasicBlocks (64, 128, 256, 512 channels, strides 1, 2, 2, 2), global
    average pooling, one linear layer: 11.2 M parameters for 10 classes."""
    _, _, channels = image_shape
    layers: list[nn.Module] = [nn.Conv2d(channels, 64, 3, padding=1, bias=False), norm_layer(norm, 64), nn.ReLU()]
    fan_in = 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(fan_in, width, stride, norm), BasicBlock(width, width, 1, norm)]
        fan_in = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def resnet_shallow(image_shape, classes, norm="batch", widths=(64, 128, 256, 512), stem_stride=1):
    """The FedWAvg paper's "shallower variant of ResNet" (section 3.3): four residual blocks of two 3x3
    conv + BatchNorm, the last three with a 1x1 conv + BN shortcut ("three shortcut connections"),
    global average pooling and one linear layer. The paper gives no widths nor stem: a 3x3 stride-1
    stem conv + norm (without one the first block would change shape too, making four shortcuts) and
    ResNet-18's widths 64-128-256-512 with strides 1, 2, 2, 2 (ResNet-18 with one block per stage,
    4.9 M parameters for 10 classes)."""
    _, _, channels = image_shape
    layers: list[nn.Module] = [
        nn.Conv2d(channels, widths[0], 3, stride=stem_stride, padding=1, bias=False),
        norm_layer(norm, widths[0]),
        nn.ReLU(),
    ]
    fan_in = widths[0]
    for width, stride in zip(widths, (1, 2, 2, 2)):
        layers.append(BasicBlock(fan_in, width, stride, norm))
        fan_in = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(fan_in, classes)]
    return nn.Sequential(*layers)


def resnet_shallow_small(image_shape, classes, norm="batch"):
    """resnet_shallow at a quarter of the widths (16-32-64-128; 0.31 M parameters) and a stride-2 stem,
    for the default profile on a CPU: the same blocks, shortcuts and BatchNorm. On this 2-core CPU an
    Adam step of 64 CIFAR images took 0.030 s, against 0.147 s with a stride-1 stem (4.9 M-parameter
    resnet_shallow: about 1 s)."""
    return resnet_shallow(image_shape, classes, norm, widths=(16, 32, 64, 128), stem_stride=2)


def densenet121(image_shape, classes):
    """torchvision's DenseNet-121 (growth 32, blocks 6-12-24-16, BatchNorm) for the FedWAvg paper's
    Table 1, its ImageNet stem (7x7 stride-2 conv and 3x3 max-pool, which would shrink a 28x28 image
    to 7x7 before the first block) replaced by one 3x3 stride-1 conv, as CIFAR adaptations do; the
    input's channel count (1 for MNIST) sets the stem's."""
    from torchvision.models import densenet121 as torchvision_densenet121

    _, _, channels = image_shape
    model = torchvision_densenet121(weights=None, num_classes=classes)
    model.features.conv0 = nn.Conv2d(channels, 64, 3, padding=1, bias=False)
    model.features.pool0 = nn.Identity()
    return model


MODELS = {
    "mlp_200": lambda shape, classes: mlp(shape, classes, [200]),
    "mlp_200_200": lambda shape, classes: mlp(shape, classes, [200, 200]),
    "cnn_mnist": cnn_mnist,
    "cnn_fedavg": cnn_fedavg,
    "cnn_fedavg_bn": cnn_fedavg_bn,
    "cnn_small": cnn_small,
    "resnet18": resnet18,
    "resnet_shallow": resnet_shallow,
    "resnet_shallow_small": resnet_shallow_small,
    "densenet121": densenet121,
}


def build_model(name: str, image_shape, classes: int, seed: int, norm: str | None = None) -> nn.Module:
    """A freshly initialised model; the initialisation depends on `seed` only. `norm` (None: the
    model's default) applies to the models in settings.MODEL_NORMS."""
    options = {} if norm is None else {"norm": norm}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return keyed_batch_norms(MODELS[name](tuple(image_shape), classes, **options))


def frozen_parameters(model: nn.Module, freeze: str) -> set[str]:
    """The parameter names `freeze` holds fixed: for "classifier", the last linear layer's (the output
    layer every model here ends with)."""
    if freeze == "none":
        return set()
    last = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)][-1]
    return {f"{last}.{p}" for p, _ in model.get_submodule(last).named_parameters()}


def batch_norm_presence(model: nn.Module) -> list[str]:
    """The names of the `present` buffers of the model's keyed BatchNorms."""
    return [f"{name}.present" for name, module in model.named_modules() if isinstance(module, KeyedBatchNorm2d)]


def dropout_masks(model: nn.Module) -> dict[str, KeyedDropout]:
    """The keyed dropouts of a model, by the name of their mask buffer."""
    return {
        f"{name}.mask": module
        for name, module in model.named_modules()
        if isinstance(module, KeyedDropout) and module.p > 0
    }


def model_buffers(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state the server carries besides parameters (BatchNorm running statistics); the per-step
    inputs (dropout masks, BatchNorm's `present`) excluded."""
    return {
        name: value.detach().clone()
        for name, value in model.named_buffers()
        if not name.endswith((".mask", ".present"))
    }
