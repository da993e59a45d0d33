"""SavedBytesMeter: measure the bytes autograd saves for backward, one count per storage.

``torch.autograd.graph.saved_tensors_hooks`` calls a pack hook every time an operation saves a tensor for
backward. Several saves often share one storage (``x.t()`` and ``x.view(...)`` are views of ``x``; q, k and v
are views of one projection; one input is saved by two consumers), so counting packs over-counts memory. This
meter keys every saved tensor by its storage (device, ``data_ptr``) and counts ``untyped_storage().nbytes()``
once while at least one saved reference to that storage is alive. Release is tracked with
``weakref.finalize`` on the object the pack hook hands to autograd: it dies when autograd frees the saved
variable (after backward, or when the graph is dropped), never on unpack (unpack may run more than once).

The meter works on CPU and CUDA tensors alike; on CUDA it also records ``torch.cuda.max_memory_allocated``
over the block (``cuda_peak_bytes``), which sees every allocation, saved or not.

Example
-------
>>> import torch
>>> from thrifty.compress import SavedBytesMeter
>>> lin = torch.nn.Linear(8, 4)
>>> x = torch.randn(16, 8, requires_grad=True)
>>> with SavedBytesMeter(exclude=lin) as meter:
...     y = lin(x).sum()
>>> meter.saved_bytes          # x itself (16 * 8 * 4 bytes); the weight is excluded
512
>>> y.backward(); meter.saved_bytes, meter.peak_bytes
(0, 512)
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

__all__ = ["SavedBytesMeter", "StorageRecord"]

_Key = tuple[str, int, int]  # (device type, device index, storage data_ptr)


@dataclass
class StorageRecord:
    """One saved storage: its bytes, the first saved view's shape/dtype, the module it was first saved in."""

    nbytes: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    module: str | None
    packs: int = 0  # how many times it was saved (all live and released packs)


class _Saved:
    """What the pack hook hands to autograd; its death releases one reference to the storage."""

    __slots__ = ("__weakref__", "tensor")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def has_data(t: torch.Tensor) -> bool:
    """False for tensors without data: on the meta device, or a ``FakeTensor`` (``FakeTensorMode``: shapes,
    dtypes and a device such as cpu, so autocast and device-specific kernels apply, but no memory)."""
    return t.device.type != "meta" and not isinstance(t, FakeTensor)


def storage_key(t: torch.Tensor) -> _Key:
    """Identity of ``t``'s storage: (device type, index, address). Tensors without data (meta, fake) have no
    address (``data_ptr`` is 0 for all of them), so there the storage object's identity stands in; it is
    unique while the storage lives, which is all a walk over live saved tensors needs."""
    dev = t.device
    storage = t.untyped_storage()
    ident = int(storage.data_ptr()) if has_data(t) else int(storage._cdata)
    return (dev.type, -1 if dev.index is None else int(dev.index), ident)


# Meters active now, outermost first. Only the innermost pair of saved-tensor hooks runs, so every meter's
# hooks serve all active meters: a meter entered inside another one leaves the outer one counting.
_ACTIVE: list[SavedBytesMeter] = []


def _pack_all(t: torch.Tensor) -> Any:
    key = storage_key(t)
    counting = [m for m in _ACTIVE if not m._excluded(t, key)]
    if not counting:
        return t
    handle = _Saved(t)
    for meter in counting:
        meter._track(t, key, handle)
    return handle


def _unpack(obj: Any) -> torch.Tensor:
    return obj.tensor if isinstance(obj, _Saved) else obj


class SavedBytesMeter:
    """Context manager that measures saved-for-backward bytes with storage de-duplication.

    The attributes below are valid during and after the block.

    Parameters
    ----------
    exclude : nn.Module | Iterable[Tensor] | Callable[[Tensor], bool] | None
        Saved tensors not to count. A module excludes every storage of its parameters and buffers
        (looked up at each save, so buffers replaced during the block are honoured); an iterable excludes
        the storages of those tensors; a callable excludes the tensors for which it returns True.
        Parameters are saved by ops such as ``nn.Linear`` (``weight.t()``), so pass the model to measure
        activations only.
    modules : Iterable[tuple[str, nn.Module]] | None
        Named modules to attribute saves to: a storage first saved while a listed module's forward runs
        is credited to the innermost such module (``by_module``).

    Attributes
    ----------
    saved_bytes : int
        Bytes of the distinct storages saved and still alive now.
    peak_bytes : int
        Largest ``saved_bytes`` seen.
    total_bytes : int
        Sum of ``nbytes`` over the records: every distinct storage saved during the block, released or
        not (a storage saved again after all its saves were released starts a new record).
    packs : int
        Number of pack-hook calls that were counted (not excluded).
    by_module : dict[str, int]
        Bytes of distinct storages first saved inside each module in ``modules`` (see above).
    records : list[StorageRecord]
        One record per distinct live storage saved (in order of first save).
    cuda_peak_bytes : int | None
        ``torch.cuda.max_memory_allocated()`` over the block minus the allocation at entry, when CUDA is
        available and initialised (else None; also None for a meter nested in another one).

    Notes
    -----
    The hooks are the public ``torch.autograd.graph.saved_tensors_hooks``; only the innermost pair of
    hooks applies, so the meter sees nothing inside another ``saved_tensors_hooks`` block (e.g. a
    non-reentrant checkpoint region stores its own handles). Meters nest: one entered inside another counts
    what is saved in its block, and the outer one keeps counting it too. Eager mode only.

    Raises
    ------
    TypeError
        If ``exclude`` or ``modules`` has another type.
    RuntimeError
        If the meter is entered twice at the same time.
    """

    def __init__(
        self,
        exclude: nn.Module | Iterable[torch.Tensor] | Callable[[torch.Tensor], bool] | None = None,
        *,
        modules: Iterable[tuple[str, nn.Module]] | None = None,
    ) -> None:
        self._exclude_module: nn.Module | None = None
        self._exclude_fn: Callable[[torch.Tensor], bool] | None = None
        self._exclude_keys: set[_Key] = set()
        if exclude is None:
            pass
        elif isinstance(exclude, nn.Module):
            self._exclude_module = exclude
        elif isinstance(exclude, torch.Tensor):
            self._exclude_keys = {storage_key(exclude)}
        elif callable(exclude):
            self._exclude_fn = exclude
        elif isinstance(exclude, Iterable):
            tensors = list(exclude)
            if not all(isinstance(t, torch.Tensor) for t in tensors):
                raise TypeError("exclude must be a Module, an iterable of Tensors, a callable or None")
            self._exclude_keys = {storage_key(t) for t in tensors}
        else:
            raise TypeError(f"exclude must be a Module, an iterable of Tensors, a callable or None, got {type(exclude).__name__}")
        if modules is not None and not isinstance(modules, Iterable):
            raise TypeError(
                f"modules must be an iterable of (name, nn.Module) pairs, e.g. model.named_modules(), "
                f"got {type(modules).__name__}"
            )
        named = [] if modules is None else list(modules)
        for item in named:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], nn.Module)):
                raise TypeError("modules must be an iterable of (name, nn.Module) pairs, e.g. model.named_modules()")
        self._modules = named
        self._stack: list[str] = []
        self._handles: list[Any] = []
        self._live: dict[_Key, int] = {}  # storage -> live pack count
        self._bytes: dict[_Key, int] = {}
        self._active = False
        self._hooks: torch.autograd.graph.saved_tensors_hooks | None = None
        self._cuda_base: int | None = None
        self.saved_bytes = 0
        self.peak_bytes = 0
        self.total_bytes = 0
        self.packs = 0
        self.by_module: dict[str, int] = {name: 0 for name, _ in named}
        self.records: list[StorageRecord] = []
        self._record_of: dict[_Key, StorageRecord] = {}
        self.cuda_peak_bytes: int | None = None

    # -- hooks ---------------------------------------------------------------------------------------
    def _excluded(self, t: torch.Tensor, key: _Key) -> bool:
        if key in self._exclude_keys:
            return True
        if self._exclude_module is not None:
            for p in self._exclude_module.parameters():
                if storage_key(p) == key:
                    return True
            for b in self._exclude_module.buffers():
                if storage_key(b) == key:
                    return True
        return self._exclude_fn is not None and bool(self._exclude_fn(t))

    def _track(self, t: torch.Tensor, key: _Key, handle: _Saved) -> None:
        """Count one save of ``t`` (storage ``key``) until ``handle`` dies."""
        self.packs += 1
        n = self._live.get(key, 0)
        if n == 0:
            nbytes = int(t.untyped_storage().nbytes())
            self._bytes[key] = nbytes
            self.saved_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.saved_bytes)
            module = self._stack[-1] if self._stack else None
            rec = StorageRecord(nbytes, tuple(t.shape), t.dtype, module)
            self._record_of[key] = rec
            self.records.append(rec)
            self.total_bytes += nbytes
            if module is not None:
                self.by_module[module] += nbytes
        self._record_of[key].packs += 1
        self._live[key] = n + 1
        weakref.finalize(handle, self._release, key)

    def _release(self, key: _Key) -> None:
        n = self._live[key] - 1
        if n == 0:
            del self._live[key]
            self.saved_bytes -= self._bytes.pop(key)
            # the address may be reused by a new storage: a later save starts a new record
            del self._record_of[key]
        else:
            self._live[key] = n

    # -- context manager -----------------------------------------------------------------------------
    def __enter__(self) -> SavedBytesMeter:  # noqa: PYI034
        if self._active:
            raise RuntimeError("this SavedBytesMeter is already active")
        self._active = True
        for name, mod in self._modules:
            self._handles.append(mod.register_forward_pre_hook(self._make_pre(name)))
            self._handles.append(mod.register_forward_hook(self._make_post(name), always_call=True))
        nested = bool(_ACTIVE)  # resetting the CUDA peak would corrupt the outer meter's
        if not nested and torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._cuda_base = torch.cuda.memory_allocated()
        self._hooks = torch.autograd.graph.saved_tensors_hooks(_pack_all, _unpack)
        self._hooks.__enter__()
        _ACTIVE.append(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._hooks is not None
        _ACTIVE.remove(self)
        self._hooks.__exit__(exc_type, exc, tb)
        self._hooks = None
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._stack.clear()
        if self._cuda_base is not None:
            torch.cuda.synchronize()
            self.cuda_peak_bytes = torch.cuda.max_memory_allocated() - self._cuda_base
        self._active = False

    def _make_pre(self, name: str) -> Callable[..., None]:
        def pre(module: nn.Module, args: Any) -> None:
            self._stack.append(name)

        return pre

    def _make_post(self, name: str) -> Callable[..., None]:
        def post(module: nn.Module, args: Any, output: Any) -> None:
            if self._stack and self._stack[-1] == name:
                self._stack.pop()

        return post

    def __repr__(self) -> str:
        return (
            f"SavedBytesMeter(saved_bytes={self.saved_bytes:,}, peak_bytes={self.peak_bytes:,}, "
            f"total_bytes={self.total_bytes:,}, storages={len(self.records)}, packs={self.packs})"
        )


def step_saved_peak(model: nn.Module, batch: Mapping[str, torch.Tensor], loss_of: Callable[[Any], torch.Tensor]) -> int:
    """The saved-for-backward peak of one forward + backward of ``model(**batch)`` (``loss_of(output)`` the
    loss), parameters, buffers and the batch's own tensors excluded (alive anyway), gradients cleared after.
    The measure the predictor's ``saved_bytes`` is checked against (tests, benches)."""
    held = {storage_key(t) for t in [*model.parameters(), *model.buffers(), *batch.values()]}
    with SavedBytesMeter(exclude=lambda t: storage_key(t) in held) as meter:
        loss = loss_of(model(**batch))
    loss.backward()  # type: ignore[no-untyped-call]
    model.zero_grad(set_to_none=True)
    del loss
    gc.collect()
    return meter.peak_bytes
