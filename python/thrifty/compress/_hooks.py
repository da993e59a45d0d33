"""The generic saved-tensor path: STAC-R factors for the activations of *any* op (eager mode only).

:class:`CompressedLinear` covers ``nn.Linear`` inputs with a custom op whose backward never rebuilds its input.
Every other op (GELU, softmax, attention, elementwise products, normalisations, ...) saves its tensors through
autograd; :func:`compress_saved` installs ``torch.autograd.graph.saved_tensors_hooks`` that store those tensors
as the same low-rank + residual factors (the ``thrifty::stac_compress`` / ``thrifty::stac_decompress`` ops and
the per-site :class:`~thrifty.compress._codec.LayerCodec`: planned budget, tracked basis, refresh schedule)
and rebuild them when backward asks (``unpack``).

What is compressed
------------------
- **One copy per storage.** Saves are keyed by their storage (device, ``data_ptr``): q/k/v views of one
  projection, an input saved by two consumers (SwiGLU gate/up, ``y*y``), ``x`` and ``x.t()`` - the storage is
  compressed once and every saved view is rebuilt from it (``as_strided`` with the view's size, stride and
  offset). The storage is read as a matrix ``(numel / w, w)`` with ``w`` the last dimension of the tensor that
  owns it (its ``_base``), which is the feature dimension of an activation.
- **Skipped** (saved as they are, counted in :attr:`SavedCompressor.skipped` by reason): parameters and views
  of parameters (``nn.Linear`` saves ``weight.t()``), the storages of ``exclude``
  (a module's parameters and buffers), everything saved while a :class:`CompressedLinear` runs its forward
  (the library's own factors and basis), non-float dtypes (indices, masks, int8 factors), storages below
  ``min_bytes``, storages whose owner has fewer than 2 features, and storages the budget cannot compress
  (the plan raises; such a storage is kept dense rather than failing the step).
- **Sites.** The k-th distinct storage compressed in a forward is site k; a :class:`SavedCompressor` keeps
  one codec per (site, width, dtype, device) across ``with`` blocks, so the basis of a site is planned once
  and then tracked (one warm subspace iteration per step, as for a compressed Linear). Use one compressor
  object per training loop and enter it for every step to get the tracked basis.

The exactness switch ``exact=True`` stores fp32 coefficients in the identity basis and no residual: the
rebuilt tensors equal the saved ones bit for bit, so gradients equal the uncompressed run's (it saves no
memory; it tests the machinery).

Eager only
----------
Saved-tensor hooks were silently incorrect under ``torch.compile`` (pytorch issues 116221 / 113263) and their
support there is still version dependent, so this path refuses to run with compiled code: entering the
context while Dynamo traces, or a save made by a compiled graph (traced or at run time), raises
``RuntimeError``. Use :func:`stac_r` (a custom op
with a fake registration) for compiled models.

Composition: only the innermost pair of saved-tensor hooks applies. A non-reentrant
``torch.utils.checkpoint`` region installs its own hooks, so its tensors are recomputed, not compressed; the
checkpoint's inputs saved outside the region are compressed as usual. A reentrant checkpoint recomputes in
backward with grad enabled: if backward runs inside the block, the recomputed saves are compressed too.
"""

from __future__ import annotations

import math
import sys
import weakref
from collections.abc import Iterable
from types import FrameType, TracebackType
from typing import Any

import torch
from torch import Tensor, nn

from thrifty.compress._codec import LayerCodec
from thrifty.compress._kernels import decompress
from thrifty.compress._linear import CompressedLinear
from thrifty.compress._meter import storage_key

__all__ = ["SavedCompressor", "compress_saved"]

_Key = tuple[str, int, int]  # (device type, device index, storage data_ptr)
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)

# Depth of CompressedLinear forwards running now (global module hooks installed while a compressor is
# active): everything saved inside one is the library's own state (weight, basis, factors) and is skipped.
_linear_depth = 0
_active: list[SavedCompressor] = []
_module_hooks: list[Any] = []


def _is_compiling() -> bool:
    fn = getattr(torch.compiler, "is_compiling", None)
    return bool(fn()) if fn is not None else False


def _in_compiled_graph() -> bool:
    """True when the save comes from a compiled graph's runtime (AOTAutograd saves its tensors in Python
    frames of ``torch._functorch._aot_autograd``); a short walk up the Python stack."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(24):
        if frame is None:
            return False
        if "_aot_autograd" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


_COMPILE_MSG = (
    "compress_saved: saved-tensor hooks are eager-only (they were silently incorrect under torch.compile, "
    "pytorch issue 116221, and their support there depends on the torch version); use "
    "thrifty.compress.stac_r, a custom op, for compiled models, or run this model eagerly"
)


def _pre_forward(module: nn.Module, args: Any) -> None:
    global _linear_depth
    if _is_compressed_linear(module):
        _linear_depth += 1


def _post_forward(module: nn.Module, args: Any, output: Any) -> None:
    global _linear_depth
    if _is_compressed_linear(module) and _linear_depth > 0:
        _linear_depth -= 1


def _is_compressed_linear(module: nn.Module) -> bool:
    return isinstance(module, CompressedLinear)


def _install_module_hooks() -> None:
    if not _module_hooks:
        from torch.nn.modules import module as nn_module

        _module_hooks.append(nn_module.register_module_forward_pre_hook(_pre_forward))
        _module_hooks.append(nn_module.register_module_forward_hook(_post_forward, always_call=True))


def _remove_module_hooks() -> None:
    global _linear_depth
    for h in _module_hooks:
        h.remove()
    _module_hooks.clear()
    _linear_depth = 0


class _Entry:
    """One compressed storage: the factors of its matrix view, shared by every saved view of it."""

    __slots__ = ("__weakref__", "bits", "block", "d", "dense", "dtype", "factors", "handles", "nbytes", "numel",
                 "storage", "stored", "u")  # fmt: skip

    def __init__(
        self, u: Tensor, factors: tuple[Tensor, ...], d: int, block: int, bits: int, dtype: torch.dtype,
        numel: int, nbytes: int, storage: torch.UntypedStorage,
    ) -> None:  # fmt: skip
        # a weak reference to the storage object (torch keeps one Python object per live storage): tells a
        # reused address from the same storage without keeping the dense data alive
        self.storage = weakref.ref(storage)
        self.handles = 0
        self.u = u
        self.factors = factors
        self.d = d
        self.block = block
        self.bits = bits
        self.dtype = dtype
        self.numel = numel
        self.nbytes = nbytes
        self.stored = sum(int(f.numel()) * f.element_size() for f in factors)
        self.dense: weakref.ReferenceType[Tensor] | None = None  # the rebuilt storage while something uses it

    def rebuild(self) -> Tensor:
        """The whole storage rebuilt as a flat tensor of the saved dtype (decompressed once while alive)."""
        cached = None if self.dense is None else self.dense()
        if cached is not None:
            return cached
        with torch.no_grad(), torch.autocast(self.u.device.type, enabled=False):
            x = decompress(self.u, *self.factors, d=self.d, block=self.block, bits=self.bits)
            flat = x.reshape(-1)
            if flat.dtype != self.dtype:
                flat = flat.to(self.dtype)
        self.dense = weakref.ref(flat)
        return flat


class _Handle:
    """What the pack hook hands to autograd for a compressed save: the shared entry and the view geometry."""

    __slots__ = ("__weakref__", "entry", "offset", "size", "stride")

    def __init__(self, entry: _Entry, t: Tensor) -> None:
        self.entry = entry
        self.size = tuple(t.size())
        self.stride = tuple(t.stride())
        self.offset = int(t.storage_offset())


class SavedCompressor:
    """Reusable context manager compressing the tensors autograd saves (see :func:`compress_saved`).

    The attributes below are cumulative over every block this object was entered for (see
    :meth:`reset_stats`).

    Parameters
    ----------
    ratio : float > 1, default=8
        Stored-bytes target per storage: dense bytes / stored bytes (as for :func:`stac_r`).
    exact : bool, default=False
        Identity basis, fp32 coefficients, no residual: rebuilt tensors equal the saved ones exactly.
    min_bytes : int >= 0, default=65536
        Storages smaller than this are saved as they are (compression overhead would dominate).
    exclude : nn.Module | Iterable[Tensor] | None
        Storages never to compress: a module's parameters and buffers (read when the block is entered), or
        the given tensors. Parameters and views of parameters are skipped anyway.
    seed : int >= 0, default=0
        Key of the codecs' stochastic rounding (only with ``stochastic=True``).
    stochastic : bool, default=False
        Stochastic rounding of the residual values.

    Attributes
    ----------
    packs : int
        Pack-hook calls.
    compressed : int
        Storages compressed (each once, however many times it was saved).
    skipped : dict[str, int]
        Saves kept dense, by reason: ``"parameter"``, ``"excluded"``, ``"library"`` (inside a
        CompressedLinear), ``"dtype"``, ``"layout"`` (sparse, nested, meta, tensor subclasses), ``"small"``,
        ``"shape"``, ``"budget"``.
    stored_bytes, dense_bytes : int
        Live now: bytes of the factors held, and the dense bytes those storages had.
    peak_stored_bytes, peak_dense_bytes : int
        Largest values of the two.
    codecs : dict
        The per-site codecs, keyed by (site, width, dtype, device).

    Raises
    ------
    TypeError / ValueError naming the argument for bad parameters; RuntimeError when entered twice at once,
    or under ``torch.compile`` (eager only).
    """

    def __init__(
        self,
        ratio: float = 8.0,
        *,
        exact: bool = False,
        min_bytes: int = 65536,
        exclude: nn.Module | Iterable[Tensor] | None = None,
        seed: int = 0,
        stochastic: bool = False,
    ) -> None:
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
            raise TypeError(f"ratio: expected a number, got {type(ratio).__name__}")
        if not math.isfinite(float(ratio)) or float(ratio) <= 1.0:
            raise ValueError(f"ratio: must be a finite number > 1, got {ratio}")
        for name, flag in (("exact", exact), ("stochastic", stochastic)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name}: expected a bool, got {type(flag).__name__}")
        for name, v in (("min_bytes", min_bytes), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
            if v < 0:
                raise ValueError(f"{name}: must be >= 0, got {v}")
        self._exclude_module: nn.Module | None = None
        self._exclude_tensors: list[Tensor] = []
        if exclude is None:
            pass
        elif isinstance(exclude, nn.Module):
            self._exclude_module = exclude
        elif isinstance(exclude, Tensor):
            self._exclude_tensors = [exclude]
        elif isinstance(exclude, Iterable):
            tensors = list(exclude)
            if not all(isinstance(t, Tensor) for t in tensors):
                raise TypeError("exclude: expected an nn.Module, an iterable of Tensors or None")
            self._exclude_tensors = tensors
        else:
            raise TypeError(f"exclude: expected an nn.Module, an iterable of Tensors or None, got {type(exclude).__name__}")
        self.ratio = float(ratio)
        self.exact = exact
        self.min_bytes = min_bytes
        self.seed = seed
        self.stochastic = stochastic
        self.codecs: dict[tuple[int, int, torch.dtype, str], LayerCodec] = {}
        self._excluded: set[_Key] = set()
        self._live: dict[_Key, _Entry] = {}
        self._site = 0
        self._hooks: torch.autograd.graph.saved_tensors_hooks | None = None
        self.stored_bytes = 0
        self.dense_bytes = 0
        self.reset_stats()

    def reset_stats(self) -> None:
        """Zero the counters (the live byte counts and the codecs are kept)."""
        self.packs = 0
        self.compressed = 0
        self.skipped: dict[str, int] = {}
        self.peak_stored_bytes = self.stored_bytes
        self.peak_dense_bytes = self.dense_bytes

    # -- hooks ---------------------------------------------------------------------------------------
    def _skip(self, reason: str, t: Tensor) -> Tensor:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        return t

    def _pack(self, t: Tensor) -> Any:
        if _is_compiling() or _in_compiled_graph():
            raise RuntimeError(_COMPILE_MSG)
        self.packs += 1
        if isinstance(t, nn.Parameter) or isinstance(t._base, nn.Parameter):
            return self._skip("parameter", t)
        if _linear_depth > 0:
            return self._skip("library", t)
        if t.dtype not in _FLOATS:
            return self._skip("dtype", t)
        if type(t) is not Tensor or t.layout != torch.strided or t.device.type == "meta":
            return self._skip("layout", t)  # sparse, nested, meta and tensor subclasses stay as they are
        key = storage_key(t)
        if key in self._excluded:
            return self._skip("excluded", t)
        storage = t.untyped_storage()
        entry = self._live.get(key)
        if entry is not None and entry.storage() is not storage:
            entry = None  # the address was freed and reused by a new storage: the old entry is stale
        if entry is None:
            made = self._compress(t, key)
            if isinstance(made, str):
                return self._skip(made, t)
            entry = made
            self._live[key] = entry
        elif entry.dtype != t.dtype:  # the same storage saved as another dtype: keep this view dense
            return self._skip("dtype", t)
        handle = _Handle(entry, t)
        entry.handles += 1
        weakref.finalize(handle, self._release, key, entry)
        return handle

    def _compress(self, t: Tensor, key: _Key) -> _Entry | str:
        storage = t.untyped_storage()
        nbytes = int(storage.nbytes())
        if nbytes < max(self.min_bytes, 1):
            return "small"
        owner = t._base if t._base is not None else t
        w = int(owner.shape[-1]) if owner.dim() >= 1 else 1
        numel = nbytes // t.element_size()
        if w < 2 or numel % w != 0 or numel // w < 1:
            return "shape"
        dev = t.device
        ckey = (self._site, w, t.dtype, str(dev))
        codec = self.codecs.get(ckey)
        if codec is None:
            codec = LayerCodec(
                w, None, None if self.exact else self.ratio, seed=self.seed, layer_index=len(self.codecs),
                overrides={"stochastic": True} if self.stochastic and not self.exact else None, exact=self.exact,
            )  # fmt: skip
        flat = torch.empty(0, dtype=t.dtype, device=dev).set_(storage, 0, (numel,), (1,))
        x2d = flat.view(numel // w, w)
        try:
            with torch.no_grad(), torch.autocast(dev.type, enabled=False):
                u = codec.basis_for(x2d)
                factors = codec.encode(x2d, u)
        except ValueError as exc:
            if "NaN" in str(exc) or "infinity" in str(exc):
                raise ValueError(f"compress_saved: a saved tensor of shape {tuple(t.shape)} contains NaN or infinity") from exc
            return "budget"  # the budget cannot hold this width (planning refused): keep it dense
        self.codecs[ckey] = codec
        self._site += 1
        cfg = codec.config
        assert cfg is not None
        entry = _Entry(u, tuple(factors), w, cfg.block, cfg.bits, t.dtype, numel, nbytes, storage)
        self.compressed += 1
        self.stored_bytes += entry.stored
        self.dense_bytes += nbytes
        self.peak_stored_bytes = max(self.peak_stored_bytes, self.stored_bytes)
        self.peak_dense_bytes = max(self.peak_dense_bytes, self.dense_bytes)
        return entry

    def _release(self, key: _Key, entry: _Entry) -> None:
        entry.handles -= 1
        if entry.handles == 0:
            if self._live.get(key) is entry:
                del self._live[key]
            self.stored_bytes -= entry.stored
            self.dense_bytes -= entry.nbytes

    @staticmethod
    def _unpack(obj: Any) -> Tensor:
        if not isinstance(obj, _Handle):
            return obj  # type: ignore[no-any-return]
        flat = obj.entry.rebuild()
        return flat.as_strided(obj.size, obj.stride, obj.offset)

    # -- context manager -----------------------------------------------------------------------------
    def __enter__(self) -> SavedCompressor:  # noqa: PYI034
        if _is_compiling():
            raise RuntimeError(_COMPILE_MSG)
        if self._hooks is not None:
            raise RuntimeError("this SavedCompressor is already active")
        keys: set[_Key] = set()
        if self._exclude_module is not None:
            keys.update(storage_key(p) for p in self._exclude_module.parameters())
            keys.update(storage_key(b) for b in self._exclude_module.buffers())
        keys.update(storage_key(t) for t in self._exclude_tensors)
        self._excluded = keys
        self._site = 0
        _install_module_hooks()
        _active.append(self)
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._hooks is not None
        self._hooks.__exit__(exc_type, exc, tb)
        self._hooks = None
        _active.remove(self)
        if not _active:
            _remove_module_hooks()

    def __repr__(self) -> str:
        return (
            f"SavedCompressor(ratio={self.ratio:g}, exact={self.exact}, compressed={self.compressed}, "
            f"stored_bytes={self.stored_bytes:,}, dense_bytes={self.dense_bytes:,}, skipped={self.skipped})"
        )


def compress_saved(
    ratio: float = 8.0,
    *,
    exact: bool = False,
    min_bytes: int = 65536,
    exclude: nn.Module | Iterable[Tensor] | None = None,
    seed: int = 0,
    stochastic: bool = False,
) -> SavedCompressor:
    """Compress the activations autograd saves for backward with STAC-R factors (eager mode only).

    Returns a :class:`SavedCompressor`, a context manager: every tensor an op saves for backward inside the
    ``with`` block is stored as low-rank coefficients plus a sparse quantized residual, once per storage,
    and rebuilt when backward needs it. Parameters (and views of them), non-float tensors, small storages and
    the factors of :class:`CompressedLinear` layers are saved as they are. Keep the object and enter it at
    every step: each save site keeps its planned budget and tracked basis across steps.

    Parameters
    ----------
    ratio : float > 1, default=8
        Dense bytes / stored bytes per storage (the plan spends the budget on rank, coefficient format and
        residual from the first batch's spectrum, as :func:`stac_r` does).
    exact : bool, default=False
        The exactness switch: identity basis, fp32 coefficients, no residual; gradients equal the
        uncompressed run's (saves no memory).
    min_bytes : int >= 0, default=65536
        Storages below this many bytes stay dense.
    exclude : nn.Module | Iterable[Tensor] | None
        Storages never compressed (a module's parameters and buffers, or given tensors).
    seed, stochastic
        Stochastic rounding of the residual values, keyed by ``seed``.

    Returns
    -------
    SavedCompressor (its counters: ``packs``, ``compressed``, ``skipped``, ``stored_bytes``,
    ``peak_stored_bytes``, ``dense_bytes``, ``peak_dense_bytes``).

    Raises
    ------
    TypeError / ValueError naming the argument; RuntimeError under ``torch.compile`` (the hooks path is
    eager-only: use :func:`stac_r`, a custom op, for compiled models); ValueError when a saved tensor holds
    NaN or infinity.

    Notes
    -----
    Only the innermost saved-tensor hooks apply: inside a non-reentrant ``torch.utils.checkpoint`` region
    (or a :class:`SavedBytesMeter`) nothing is compressed. Backward may run inside or after the block.

    Examples
    --------
    >>> import torch
    >>> from thrifty.compress import compress_saved
    >>> _ = torch.manual_seed(0)
    >>> x = torch.randn(64, 32, requires_grad=True)
    >>> with compress_saved(exact=True, min_bytes=0) as hooks:
    ...     y = torch.nn.functional.gelu(x) * x.sin()
    >>> hooks.compressed  # x, gelu(x) and sin(x): x is saved twice but compressed once
    3
    >>> y.sum().backward()
    >>> bool(torch.allclose(x.grad, torch.func.grad(lambda v: (torch.nn.functional.gelu(v) * v.sin()).sum())(x)))
    True
    """
    return SavedCompressor(
        ratio, exact=exact, min_bytes=min_bytes, exclude=exclude, seed=seed, stochastic=stochastic
    )

