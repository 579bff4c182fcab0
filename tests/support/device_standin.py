"""A stand-in for a GPU on a machine without one: tensors that say they live on another device, hold
their numbers on the CPU, and report every operation that a GPU would refuse or wait for.

Why not the `meta` device alone: meta tensors carry no numbers, so a whole round cannot run on them
(cohorts are sampled, batches sized and losses checked from data). Why not only a TorchFunctionMode:
it sees Python-level calls, not what vmap, autograd and functional_call dispatch underneath, where the
engine's tensors actually meet. So `OnDevice` is a wrapper tensor subclass (as torch's own
LoggingTensor): it claims the device `meta` (a device other than the CPU, for which autograd and
torch.func work without CUDA) and holds a real CPU tensor; its __torch_dispatch__ sees every aten
operation, after vmap and autograd, and

- records a *mix* when a CPU tensor with a dimension meets an OnDevice tensor (CUDA raises "Expected
  all tensors to be on the same device" there; CPU scalars, 0-dim, are allowed, as CUDA allows them),
  and when a CPU generator draws into an OnDevice tensor (CUDA raises there too);
- records a *sync* when a value is read back from the device: `.item()`, `bool()`, `float()`,
  `.tolist()`, a copy to the CPU, and the operations whose output size depends on the data (boolean-mask
  indexing, nonzero, unique, masked_select), which a GPU must report to the host before going on; and
  a copy from the CPU, which the host waits for (torch.cuda.set_sync_debug_mode counts it too).

A TorchDispatchMode gives factories their device: `torch.zeros(..., device=x.device)` with x on the
stand-in device makes an OnDevice tensor (but `torch.tensor(data, device=...)` is built below the
dispatcher, as a real meta tensor without numbers: the engine writes `torch.full` or
`torch.tensor(data).to(device)`, and the stand-in reports such a tensor as a mix). Generators for the
device come from `pipeline.clientdata.new_generator`, patched to make CPU generators known as the
device's.
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

DEVICE = torch.device("meta")
aten = torch.ops.aten

# Operations whose output size (or result) is data-dependent: a GPU reports it to the host first.
SIZE_FROM_DATA = {
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
    aten.argwhere.default,
    aten.is_nonzero.default,
    aten.equal.default,
    aten._local_scalar_dense.default,
    aten.repeat_interleave.Tensor,
}
ADVANCED_INDEXING = {aten.index.Tensor, aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default}
HOST_COPY_ALLOWED = {aten.copy_.default, aten._to_copy.default, aten.lift_fresh.default}  # explicit transfers


@dataclass
class Recorder:
    """What one stand-in session saw: each entry is (operation, where in pipeline/ it came from, phase)."""

    mixes: list = field(default_factory=list)
    syncs: list = field(default_factory=list)
    phase: str = ""
    device_generators: list = field(default_factory=list)  # the generators made for the device

    def is_device_generator(self, generator: torch.Generator) -> bool:
        """By seed: the dispatcher hands a generator over as a new Python object, and every keyed
        generator has a seed of its own (pipeline.clientdata.derived_seed)."""
        return generator.initial_seed() in {g.initial_seed() for g in self.device_generators}

    def record(self, kind: list, what: str) -> None:
        kind.append((what, caller(), self.phase))

    @contextlib.contextmanager
    def during(self, phase: str):
        before, self.phase = self.phase, phase
        try:
            yield
        finally:
            self.phase = before


RECORDER: Recorder | None = None


def caller() -> str:
    """The innermost frame in pipeline/ that led here (file:line function)."""
    for frame in reversed(traceback.extract_stack()):
        if "/pipeline/" in frame.filename:
            return f"{frame.filename.rsplit('/pipeline/', 1)[1]}:{frame.lineno} {frame.name}"
    return "?"


class OnDevice(torch.Tensor):
    """A tensor on the stand-in device, its numbers in `elem` (a CPU tensor)."""

    elem: torch.Tensor
    __slots__ = ["elem"]

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=DEVICE,
            requires_grad=elem.requires_grad,
        )
        wrapper.elem = elem.detach() if wrapper.requires_grad else elem
        return wrapper

    def __repr__(self):
        return f"OnDevice({self.elem!r})"

    def tolist(self):  # torch refuses tolist on subclasses; a GPU tensor's tolist is a read-back
        if RECORDER is not None:
            RECORDER.record(RECORDER.syncs, "tolist")
        return self.elem.tolist()

    def numpy(self, *args, **kwargs):
        raise TypeError("numpy() of a device tensor: copy it to the CPU first (.cpu())")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        check(func, args, kwargs)
        to_host = func is aten._to_copy.default and torch.device(kwargs.get("device") or DEVICE).type == "cpu"
        if kwargs.get("device") is not None and torch.device(kwargs["device"]).type == DEVICE.type:
            kwargs = {**kwargs, "device": torch.device("cpu")}  # its numbers stay on the CPU
        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
        return out if to_host else tree_map(wrap, out)  # a copy to the host (recorded in `check`) leaves


def unwrap(value):
    return value.elem if isinstance(value, OnDevice) else value


def wrap(value):
    return OnDevice(value) if isinstance(value, torch.Tensor) and not isinstance(value, OnDevice) else value


def check(func, args, kwargs) -> None:
    """Record what `func` on these arguments would do wrong, or wait for, on a GPU."""
    recorder = RECORDER
    if recorder is None:
        return
    leaves = tree_leaves((args, kwargs))
    if any(isinstance(t, torch.Tensor) and not isinstance(t, OnDevice) and t.is_meta for t in leaves):
        # torch.tensor(data, device=...) builds below the dispatcher: write torch.tensor(data).to(device)
        recorder.record(recorder.mixes, f"{func}: a tensor made on the device without passing through the stand-in")
    host = [t for t in leaves if isinstance(t, torch.Tensor) and not isinstance(t, OnDevice) and t.dim() > 0]
    if host and func not in HOST_COPY_ALLOWED:
        recorder.record(recorder.mixes, f"{func}: CPU tensor(s) {[tuple(t.shape) for t in host]} meet a device tensor")
    generator = kwargs.get("generator")
    if generator is not None and not recorder.is_device_generator(generator):
        recorder.record(recorder.mixes, f"{func}: a CPU generator draws into a device tensor")
    if func in SIZE_FROM_DATA:
        recorder.record(recorder.syncs, str(func))
    elif func in ADVANCED_INDEXING and any(
        isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in tree_leaves(args[1])
    ):
        recorder.record(recorder.syncs, f"{func} with a boolean mask")
    elif func is aten._to_copy.default and torch.device(kwargs.get("device") or DEVICE).type == "cpu":
        recorder.record(recorder.syncs, "copy to the CPU")
    elif func is aten.copy_.default and not isinstance(args[0], OnDevice):
        recorder.record(recorder.syncs, "copy_ into a CPU tensor")
    elif copied_from_host(func, args):
        # from pageable host memory: CUDA's sync debug mode counts it, the host waits for the copy
        recorder.record(recorder.syncs, "copy from the CPU")


def copied_from_host(func, args) -> bool:
    source = args[1] if func is aten.copy_.default else args[0] if func is aten._to_copy.default else None
    return isinstance(source, torch.Tensor) and not isinstance(source, OnDevice)


class Factories(TorchDispatchMode):
    """Operations without an OnDevice argument: a factory asked for the stand-in device makes one."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(isinstance(t, OnDevice) for t in tree_leaves((args, kwargs))):
            return NotImplemented  # OnDevice.__torch_dispatch__ takes it
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == DEVICE.type:
            check(func, args, kwargs)
            return tree_map(wrap, func(*args, **{**kwargs, "device": torch.device("cpu")}))
        return func(*args, **kwargs)


@contextlib.contextmanager
def stand_in_device():
    """A session on the stand-in device: yields its Recorder. Generators asked for the device are CPU
    generators it knows as the device's; a draw from any other generator into a device tensor is a mix."""
    from unittest import mock

    import pipeline.clientdata

    global RECORDER
    recorder = Recorder()
    real_new_generator = getattr(pipeline.clientdata, "new_generator", lambda device: torch.Generator(device=device))

    def new_generator(device):
        if torch.device(device).type != DEVICE.type:
            return real_new_generator(device)
        generator = torch.Generator()
        recorder.device_generators.append(generator)
        return generator

    RECORDER = recorder
    try:
        with mock.patch.object(pipeline.clientdata, "new_generator", new_generator, create=True), Factories():
            yield recorder
    finally:
        RECORDER = None


def on_device(tree):
    """Every tensor of a tree of dicts and lists moved to the stand-in device."""
    if isinstance(tree, dict):
        return {k: on_device(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(on_device(v) for v in tree)
    return OnDevice(tree) if isinstance(tree, torch.Tensor) and not isinstance(tree, OnDevice) else tree


def off_device(tree):
    """The CPU numbers of a tree of OnDevice tensors."""
    if isinstance(tree, dict):
        return {k: off_device(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(off_device(v) for v in tree)
    return tree.elem if isinstance(tree, OnDevice) else tree


def host_tensors(tree, path: str = "") -> list[str]:
    """Where in a tree a tensor with a dimension is not on the stand-in device (0-dim CPU scalars are
    allowed next to GPU tensors, as CUDA allows them)."""
    if isinstance(tree, dict):
        return [p for k, v in tree.items() for p in host_tensors(v, f"{path}/{k}")]
    if isinstance(tree, (list, tuple)):
        return [p for i, v in enumerate(tree) for p in host_tensors(v, f"{path}/{i}")]
    if isinstance(tree, torch.Tensor) and not isinstance(tree, OnDevice) and tree.dim() > 0:
        return [path]
    return []
