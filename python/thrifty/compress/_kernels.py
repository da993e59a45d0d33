"""Torch-level STAC-R kernels: compress, grad_weight, decompress, refresh (torch custom ops) and backends.

Data layout (the contract shared with the codec and the compressed Linear). Activations ``x`` are 2-D
``(n, d)`` (float32, bfloat16 or float16; unit column stride). ``u`` ``(d, r)`` float32 has orthonormal
columns. Stored factors:

- ``c`` ``(n, r)``: the coefficients ``X·U`` as float32 (``coef="fp32"``), bfloat16 (``"bf16"``, round to
  nearest even) or int8 (``"int8"``) with ``c_scale`` float32 ``(n,)`` = row absmax / 127 (round half away
  from zero). For the float formats ``c_scale`` is an empty float32 tensor of shape ``(0,)``.
- the residual ``E = X - deq(c)·Uᵀ`` (taken against the *stored* coefficients), per row in blocks of
  ``block`` features (``nb = ceil(d / block)``, the last block may be short and then keeps
  ``min(k, its length)`` entries): ``idx`` uint8 ``(n, nb, k)`` in-block columns of the ``k`` entries of
  largest ``|E|`` (ties: lower index), ascending; ``vals`` int8 ``(n, nb, k)`` (``bits=8``) or uint8
  ``(n, nb, ceil(k/2))`` (``bits=4``: two signed nibbles per byte, low nibble first); ``scales`` float32
  ``(n, nb)`` with value = q * scale, scale = max|kept| / 127 (or / 7), 0 when all kept are zero. Unused
  slots of a short last block hold index 0 and value 0. ``k = 0`` stores no residual: ``vals``/``idx`` have a
  zero-size last dimension and ``scales`` has shape ``(n, 0)``.
- rounding of the residual: round half away from zero, or stochastic ``floor(E/scale + u)`` with ``u`` from a
  counter-based generator keyed by ``(seed, row, global column)`` - identical on CPU and CUDA, so a fixed seed
  reproduces the same bits on any device and thread count.

Each op is registered per device (``torch.library`` ``register_kernel("cpu")`` / ``("cuda")``, the layout
bitsandbytes uses): the CPU kernels call ``libthrifty_stac_cpu`` (the AVX2 build when the CPU has it), the CUDA
ones ``libthrifty_stac_cuda``, loaded only when a CUDA tensor arrives (:mod:`thrifty.compress._native`, a C ABI
through ctypes). Dense GEMMs (``X·U``, ``(Gᵀ·deq(C))·Uᵀ``, ``deq(C)·Uᵀ``) use ``torch.mm``; the compiled kernels
do everything that touches the residual. Every wheel ships the kernels. A NumPy reference of the contract lives
in ``thrifty.compress._reference`` (the tests' oracle); only when the CPU library cannot be loaded (a source tree
whose cpp/ was not built) do CPU tensors run it instead - the same bits, much slower - with a one-time
RuntimeWarning, and ``backends()["cpu_fallback"]`` says so.
"""

import json
import math
import os
import threading
from typing import Any, NamedTuple

import torch
from torch import Tensor

from thrifty._warn import warn
from thrifty.compress import _native
from thrifty.compress._native import Exec, Library

__all__ = [
    "Packed",
    "backends",
    "compress",
    "decompress",
    "grad_weight",
    "refresh",
]

COEF_FORMATS = ("fp32", "bf16", "int8")
_COEF_CODE = {"fp32": 0, "bf16": 1, "int8": 2}
_COEF_DTYPE = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.int8}
_X_DTYPES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
_MAX_BLOCK = 256

_lock = threading.Lock()
_modules: dict[str, Library] = {}
_errors: dict[str, str] = {}
_LOADERS = {"_stac_cpu": _native.load_cpu, "_stac_cuda": _native.load_cuda}


class Packed(NamedTuple):
    """Output of :func:`compress`; unpacks as ``c, c_scale, vals, idx, scales``."""

    c: Tensor
    c_scale: Tensor
    vals: Tensor
    idx: Tensor
    scales: Tensor


# --------------------------------------------------------------------------------------------------------
# compiled libraries


def _load(name: str) -> Library:
    """Load kernel library ``name`` (``_stac_cpu`` / ``_stac_cuda``) once; RuntimeError with the reason when it
    is not usable."""
    with _lock:
        lib = _modules.get(name)
        if lib is not None:
            return lib
        try:
            lib = _LOADERS[name]()
        except (OSError, RuntimeError, ValueError) as exc:  # not built, or missing a system library
            _errors[name] = str(exc)
            what = "CPU" if name == "_stac_cpu" else "CUDA"
            raise RuntimeError(f"thrifty's {what} kernels ({name}) are not available: {exc}; "
                               f"{_native.rebuild_hint()}.") from exc  # fmt: skip
        _modules[name] = lib
        return lib


def _cpu() -> Library:
    return _load("_stac_cpu")


def _cuda() -> Library:
    return _load("_stac_cuda")


_warned_fallback = False


def _cpu_or_fallback() -> Library | None:
    """The compiled CPU kernels, or None: then the NumPy reference of the same contract runs instead (slow;
    only a source tree whose cpp/ is not built lacks them). Warns once; ``backends()`` reports it."""
    global _warned_fallback
    try:
        return _cpu()
    except RuntimeError as exc:
        if not _warned_fallback:
            _warned_fallback = True
            warn(
                f"{exc} Falling back to the NumPy reference kernels (same results, much slower).",
                RuntimeWarning,
            )
        return None


def _np(t: Tensor) -> Any:
    return t.detach().contiguous().numpy()


def _fallback_compress(
    x: Tensor, u: Tensor, proj: Tensor, coef: str, block: int, k: int, bits: int, stochastic: bool, seed: int,
    out: tuple[Tensor, Tensor, Tensor, Tensor, Tensor],
) -> None:  # fmt: skip
    if not (bool(torch.isfinite(proj).all()) and bool(torch.isfinite(x).all())):
        raise ValueError("x: contains NaN or infinity (non-finite coefficients or residual)")
    from thrifty.compress import _reference

    got = _reference.compress(
        _np(x.to(torch.float32)), _np(u), _np(proj), coef=coef, block=block, k=k, bits=bits,
        stochastic=stochastic, seed=_seed_u64(seed),
    )  # fmt: skip
    for dst, src in zip(out, got):
        if dst.numel():
            dst.copy_(torch.from_numpy(src).reshape(dst.shape).to(dst.dtype))


def _fallback_dense_residual(vals: Tensor, idx: Tensor, scales: Tensor, d: int, block: int, bits: int) -> Tensor:
    from thrifty.compress import _reference

    dense = _reference.dense_residual(_np(vals), _np(idx), _np(scales), d=d, block=block, bits=bits)
    return torch.from_numpy(dense).to(torch.float32)  # each entry is one float32 value q*scale


def _cpu_exec() -> Exec:
    return Exec(max(1, torch.get_num_threads()), 0, None)


def _cuda_exec(t: Tensor) -> Exec:
    """t's CUDA ordinal and the cudaStream_t of torch's current stream there (kernels are queued on it)."""
    device = int(t.device.index if t.device.index is not None else torch.cuda.current_device())
    return Exec(1, device, int(torch.cuda.current_stream(t.device).cuda_stream))


def _build_info() -> dict[str, Any]:
    path = os.path.join(_native.package_dir(), "_stac_build.json")
    try:
        with open(path, encoding="utf-8") as fh:
            info: dict[str, Any] = json.load(fh)
            return info
    except (OSError, ValueError):
        return {}


def backends() -> dict[str, Any]:
    """What was built and what runs.

    Returns
    -------
    dict
        ``cpu`` (bool: the CPU kernels load), ``cpu_simd`` (str: ``"avx2"`` or ``"generic"``, the instruction
        set of the CPU library picked for this CPU at run time), ``cpu_library`` (str: its file name),
        ``cpu_fallback`` (str: ``""``, or ``"numpy-reference"`` when the compiled CPU kernels are missing and
        CPU tensors run the NumPy reference of the same contract - identical results, much slower),
        ``cuda_built`` (bool: the CUDA library is installed), ``cuda_available`` (bool: torch sees a GPU),
        ``cuda`` (bool: the CUDA kernels load and a GPU is present), ``cuda_architectures`` (str, e.g.
        ``"75-real;...;100-real;100-virtual"``), ``cuda_compiler`` (nvcc version used), ``torch`` (version) and
        ``errors`` (dict of load errors, empty when all is well). A build without a CUDA compiler is reported
        here as ``cuda_built=False`` - never silently.

    Examples
    --------
    >>> from thrifty.compress import backends
    >>> b = backends()
    >>> b["cpu"], b["cpu_simd"] in ("avx2", "generic")
    (True, True)
    """
    info = _build_info()
    out: dict[str, Any] = {"torch": torch.__version__, "errors": {}}
    try:
        cpu = _cpu()
        out.update(cpu=True, cpu_simd=cpu.simd, cpu_library=os.path.basename(cpu.path))
    except RuntimeError as exc:
        out.update(cpu=False, cpu_simd="", cpu_library="")
        out["errors"]["_stac_cpu"] = str(exc)
    out["cpu_fallback"] = "" if out["cpu"] else "numpy-reference"
    built = os.path.isfile(_native.library_path("thrifty_stac_cuda"))
    out["cuda_built"] = built
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["cuda"] = False
    if built and out["cuda_available"]:
        try:
            _cuda()
            out["cuda"] = True
        except RuntimeError as exc:
            out["errors"]["_stac_cuda"] = str(exc)
    out["cuda_architectures"] = str(info.get("cuda_architectures", "")) if built else ""
    out["cuda_compiler"] = str(info.get("cuda_compiler", "")) if built else ""
    return out


# --------------------------------------------------------------------------------------------------------
# validation (shared by the real and the fake implementations, so torch.ops calls are checked too)


def _tensor(name: str, t: object, ndim: int, dtypes: tuple[torch.dtype, ...]) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D tensor, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name}: dtype {str(t.dtype).replace('torch.', '')} not supported (expected {names})")
    return t


def _are_tensors(**named: object) -> None:
    """TypeError naming the first argument that is not a tensor (before the dispatcher sees it)."""
    for name, t in named.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")


def _same_device(ref_name: str, ref: Tensor, **others: Tensor | None) -> None:
    for name, t in others.items():
        if t is not None and t.device != ref.device:
            raise ValueError(
                f"{name}: on device {t.device} but {ref_name} is on {ref.device}; "
                "all tensors of one call must be on the same device"
            )
    if ref.device.type not in ("cpu", "cuda", "meta"):
        raise ValueError(f"{ref_name}: device type {ref.device.type!r} not supported (cpu or cuda)")


def _int(name: str, v: Any, lo: int, hi: int) -> Any:
    if isinstance(v, torch.SymInt):  # traced with dynamic shapes: checked when concrete
        return v
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{name}: must be in [{lo}, {hi}], got {v}")
    return v


def _check_block_bits(block: Any, bits: Any) -> None:
    _int("block", block, 1, _MAX_BLOCK)
    if isinstance(bits, bool) or not isinstance(bits, int) or bits not in (4, 8):
        raise ValueError(f"bits: must be 4 or 8, got {bits!r}")


def _vals_shape(n: int, nb: int, k: int, bits: int) -> tuple[int, int, int]:
    return (n, nb, k if bits == 8 else (k + 1) // 2)


def _check_compress(
    x: Tensor, u: Tensor, xu: Tensor | None, coef: str, block: int, k: int, bits: int
) -> tuple[int, int, int, int]:
    _tensor("x", x, 2, tuple(_X_DTYPES))
    _tensor("u", u, 2, (torch.float32,))
    _same_device("x", x, u=u, xu=xu)
    n, d = x.shape
    if d < 1:
        raise ValueError("x: needs at least one feature column")
    if u.shape[0] != d:
        raise ValueError(f"u: expected {d} rows (x has {d} features), got shape {tuple(u.shape)}")
    r = u.shape[1]
    if r < 1:
        raise ValueError("u: needs at least one column")
    if xu is not None:
        _tensor("xu", xu, 2, (torch.float32,))
        if tuple(xu.shape) != (n, r):
            raise ValueError(f"xu: expected shape {(n, r)}, got {tuple(xu.shape)}")
    if coef not in _COEF_CODE:
        raise ValueError(f"coef: must be one of {COEF_FORMATS}, got {coef!r}")
    _check_block_bits(block, bits)
    _int("k", k, 0, block)
    return n, d, r, -(-d // block)


def _check_factors(
    u: Tensor, c: Tensor, c_scale: Tensor, vals: Tensor, idx: Tensor, scales: Tensor, d: int, block: int, bits: int
) -> tuple[int, int, int, int]:
    _int("d", d, 1, 2**62)
    _check_block_bits(block, bits)
    _tensor("u", u, 2, (torch.float32,))
    _tensor("c", c, 2, (torch.float32, torch.bfloat16, torch.int8))
    _tensor("c_scale", c_scale, 1, (torch.float32,))
    _tensor("idx", idx, 3, (torch.uint8,))
    _tensor("vals", vals, 3, (torch.int8,) if bits == 8 else (torch.uint8,))
    _tensor("scales", scales, 2, (torch.float32,))
    _same_device("c", c, u=u, c_scale=c_scale, vals=vals, idx=idx, scales=scales)
    n, r = c.shape
    if tuple(u.shape) != (d, r):
        raise ValueError(f"u: expected shape {(d, r)} (d features, {r} coefficients), got {tuple(u.shape)}")
    if c.dtype == torch.int8 and tuple(c_scale.shape) != (n,):
        raise ValueError(f"c_scale: int8 coefficients need shape {(n,)}, got {tuple(c_scale.shape)}")
    nb = -(-d // block)
    k = idx.shape[2]
    if tuple(idx.shape) != (n, nb, k) or k > block:
        raise ValueError(f"idx: expected shape ({n}, {nb}, k) with k <= {block}, got {tuple(idx.shape)}")
    if tuple(vals.shape) != _vals_shape(n, nb, k, bits):
        raise ValueError(f"vals: expected shape {_vals_shape(n, nb, k, bits)}, got {tuple(vals.shape)}")
    want_scales = (n, nb) if k > 0 else (n, 0)
    if tuple(scales.shape) != want_scales:
        raise ValueError(f"scales: expected shape {want_scales}, got {tuple(scales.shape)}")
    return n, r, nb, k


def _rows(t: Tensor) -> Tensor:
    """A view with unit column stride (copy only when needed)."""
    return t if t.stride(-1) == 1 and (t.shape[0] <= 1 or t.stride(0) >= t.shape[1]) else t.contiguous()


def _mm32(a: Tensor, b: Tensor) -> Tensor:
    """float32 GEMM also inside an autocast region (custom-op bodies run with autocast still active, and the
    kernels read these buffers as float32)."""
    with torch.autocast(device_type=a.device.type, enabled=False):
        out = torch.mm(a.to(torch.float32), b.to(torch.float32))
    if out.dtype != torch.float32:  # defensive: a raw pointer to it goes to C++
        raise RuntimeError(f"internal error: GEMM returned {out.dtype}")
    return out


def _coef_dequant(c: Tensor, c_scale: Tensor) -> Tensor:
    if c.dtype == torch.int8:
        return c.to(torch.float32) * c_scale[:, None]
    return c.to(torch.float32)


def _seed_u64(seed: int) -> int:
    return seed % (1 << 64)


# --------------------------------------------------------------------------------------------------------
# compress


_Outputs = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]


def _compress_setup(
    x: Tensor, u: Tensor, xu: Tensor | None, coef: str, block: int, k: int, bits: int, stochastic: bool, seed: int
) -> tuple[_Outputs, tuple[Any, ...] | None, Tensor, Tensor]:
    """Checks, the projection and the output buffers of compress on x's device: ``(outputs, kernel arguments
    (None when there are no rows), x with unit column stride, X·U)``."""
    n, d, r, nb = _check_compress(x, u, xu, coef, block, k, bits)
    xr = _rows(x)
    if xu is None:
        proj = _mm32(xr, u)
        c = proj if coef == "fp32" else torch.empty((n, r), dtype=_COEF_DTYPE[coef], device=x.device)
    else:
        proj = xu.to(torch.float32).contiguous()
        c = torch.empty((n, r), dtype=_COEF_DTYPE[coef], device=x.device)
    c_scale = torch.empty((n,) if coef == "int8" else (0,), dtype=torch.float32, device=x.device)
    vals = torch.empty(_vals_shape(n, nb, k, bits), dtype=torch.int8 if bits == 8 else torch.uint8, device=x.device)
    idx = torch.empty((n, nb, k), dtype=torch.uint8, device=x.device)
    scales = torch.empty((n, nb) if k > 0 else (n, 0), dtype=torch.float32, device=x.device)
    outs = (c, c_scale, vals, idx, scales)
    if n == 0:
        return outs, None, xr, proj
    ut = u.t().contiguous() if k > 0 else u  # Uᵀ is read only for the residual
    args = (
        xr.data_ptr(), _X_DTYPES[x.dtype], n, d, xr.stride(0) if n > 1 else d, ut.data_ptr(), proj.data_ptr(), r,
        _COEF_CODE[coef], c.data_ptr(), c_scale.data_ptr(), block, k, bits, bool(stochastic), _seed_u64(seed),
        vals.data_ptr(), idx.data_ptr(), scales.data_ptr(), ut,
    )  # fmt: skip
    return outs, args, xr, proj


@torch.library.custom_op("thrifty::stac_compress", mutates_args=(), device_types="cpu")
def _compress_op(
    x: Tensor,
    u: Tensor,
    xu: Tensor | None,
    coef: str,
    block: int,
    k: int,
    bits: int,
    stochastic: bool,
    seed: int,
) -> _Outputs:
    outs, args, xr, proj = _compress_setup(x, u, xu, coef, block, k, bits, stochastic, seed)
    if args is None:
        return outs
    if (lib := _cpu_or_fallback()) is None:
        _fallback_compress(xr, u, proj, coef, block, k, bits, bool(stochastic), seed, outs)
        return outs
    bad = lib.compress(*args[:-1], where=_cpu_exec())  # args[-1] keeps Uᵀ alive during the call
    if bad and abs(e := pow2_exponent(x)) > 8:
        # finite activations so small (subnormal) or so large that a block's quantisation step over- or
        # underflows: compress them rescaled by an exact power of two and scale the outputs back
        outs = _compress_op(ldexp(x, -e), u, None if xu is None else ldexp(xu, -e), coef, block, k, bits,
                            stochastic, seed)  # fmt: skip
        c, c_scale, vals, idx, scales = outs
        if coef == "int8":
            c_scale = ldexp(c_scale, e)
        else:
            c = ldexp(c, e)
        return c, c_scale, vals, idx, ldexp(scales, e)
    if bad:
        raise ValueError(f"x: contains NaN or infinity ({bad} non-finite coefficients or residual blocks)")
    return outs


def pow2_exponent(x: Tensor) -> int:
    """The binary exponent e of max|x| (``max|x|`` in ``[2**(e-1), 2**e)``); 0 for an empty, zero or
    non-finite ``x``. ``ldexp(x, -e)`` is then x at unit scale, exactly."""
    top = float(x.detach().abs().max()) if x.numel() else 0.0
    if not (math.isfinite(top) and top > 0.0):
        return 0
    return math.frexp(top)[1]


def ldexp(t: Tensor, e: int) -> Tensor:
    """t·2^e, exact where the result is representable, as a new tensor. In two steps so that neither
    factor over- or underflows t's dtype: float32 has neither 2^130 (the scale of a subnormal batch)
    nor 2^-150, and ``t * 2.0**130`` would multiply by inf."""
    half = e // 2
    return t * (2.0**half) * (2.0 ** (e - half))


@_compress_op.register_kernel("cuda")
def _compress_cuda(
    x: Tensor,
    u: Tensor,
    xu: Tensor | None,
    coef: str,
    block: int,
    k: int,
    bits: int,
    stochastic: bool,
    seed: int,
) -> _Outputs:
    outs, args, _, _ = _compress_setup(x, u, xu, coef, block, k, bits, stochastic, seed)
    if args is not None:
        _cuda().compress(*args[:-1], where=_cuda_exec(x))
    return outs


@_compress_op.register_fake
def _compress_fake(
    x: Tensor,
    u: Tensor,
    xu: Tensor | None,
    coef: str,
    block: int,
    k: int,
    bits: int,
    stochastic: bool,
    seed: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    n, _, r, nb = _check_compress(x, u, xu, coef, block, k, bits)
    return (
        x.new_empty((n, r), dtype=_COEF_DTYPE[coef]),
        x.new_empty((n,) if coef == "int8" else (0,), dtype=torch.float32),
        x.new_empty(_vals_shape(n, nb, k, bits), dtype=torch.int8 if bits == 8 else torch.uint8),
        x.new_empty((n, nb, k), dtype=torch.uint8),
        x.new_empty((n, nb) if k > 0 else (n, 0), dtype=torch.float32),
    )


def compress(
    x: Tensor,
    u: Tensor,
    *,
    coef: str = "bf16",
    block: int = 128,
    k: int = 0,
    bits: int = 8,
    stochastic: bool = False,
    seed: int = 0,
    xu: Tensor | None = None,
) -> Packed:
    """Compress activations into coefficients in the basis ``u`` plus a sparse quantized residual.

    Parameters
    ----------
    x : Tensor (n, d), float32 / bfloat16 / float16, CPU or CUDA
        Activations (a Linear's input flattened over leading dimensions). Not modified.
    u : Tensor (d, r), float32, same device
        Basis with orthonormal columns.
    coef : {"fp32", "bf16", "int8"}
        Storage format of the coefficients ``X·U``.
    block : int in [1, 256]
        Residual block length along the features.
    k : int in [0, block]
        Residual entries kept per row and block (0: no residual).
    bits : {4, 8}
        Residual value precision.
    stochastic : bool
        Stochastic instead of round-half-away-from-zero rounding of the residual values.
    seed : int
        Key of the counter-based rounding generator (taken modulo 2^64; combine step and layer into it).
    xu : Tensor (n, r) float32, optional
        Precomputed ``X·U`` (e.g. from :func:`refresh` with ``return_projection=True``); computed here when
        omitted.

    Returns
    -------
    Packed ``(c, c_scale, vals, idx, scales)`` in the layout of the module docstring.

    Raises
    ------
    TypeError for non-tensors or unsupported dtypes, ValueError for shapes, mixed devices, parameters out of
    range, and (CPU) non-finite ``x``. The residual E is never materialised whole.
    """
    if not isinstance(stochastic, (bool, int)):
        raise TypeError(f"stochastic: expected a bool, got {type(stochastic).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
    if not isinstance(coef, str):
        raise TypeError(f"coef: expected a str, got {type(coef).__name__}")
    _check_block_bits(block, bits)
    _int("k", k, 0, block)
    _are_tensors(x=x, u=u, **({} if xu is None else {"xu": xu}))
    s = _seed_u64(seed)
    s = s - (1 << 64) if s >= (1 << 63) else s  # the op's schema carries int64
    return Packed(*_compress_op(x, u, xu, coef, block, k, bits, bool(stochastic), s))


# --------------------------------------------------------------------------------------------------------
# grad_weight


def _grad_weight_setup(
    g: Tensor, u: Tensor, c: Tensor, c_scale: Tensor, vals: Tensor, idx: Tensor, scales: Tensor, d: int, block: int,
    bits: int,
) -> tuple[Tensor, tuple[Any, ...] | None]:  # fmt: skip
    """Checks and the dense part ``(Gᵀ·deq(C))·Uᵀ`` on g's device: ``(out, residual-kernel arguments or None)``."""
    n, _, _, k = _check_factors(u, c, c_scale, vals, idx, scales, d, block, bits)
    _check_g(g, c, n)
    g32 = _rows(g if g.dtype == torch.float32 else g.to(torch.float32))
    m = g.shape[1]
    out = _mm32(_mm32(g32.t(), _coef_dequant(c, c_scale)), u.t())
    if k == 0 or n == 0 or m == 0:
        return out, None
    out = out.contiguous()
    vc, ic, sc = vals.contiguous(), idx.contiguous(), scales.contiguous()
    args = (vc.data_ptr(), ic.data_ptr(), sc.data_ptr(), n, d, block, k, bits, g32.data_ptr(), 0, m,
            g32.stride(0) if n > 1 else m, out.data_ptr(), d, (vc, ic, sc, g32))  # fmt: skip
    return out, args


@torch.library.custom_op("thrifty::stac_grad_weight", mutates_args=(), device_types="cpu")
def _grad_weight_op(
    g: Tensor,
    u: Tensor,
    c: Tensor,
    c_scale: Tensor,
    vals: Tensor,
    idx: Tensor,
    scales: Tensor,
    d: int,
    block: int,
    bits: int,
) -> Tensor:
    out, args = _grad_weight_setup(g, u, c, c_scale, vals, idx, scales, d, block, bits)
    if args is None:
        return out
    if (lib := _cpu_or_fallback()) is None:
        vc, ic, sc, g32 = args[-1]
        out += g32.t().mm(_fallback_dense_residual(vc, ic, sc, d, block, bits))
    else:
        lib.residual_grad(*args[:-1], workspace=0, where=_cpu_exec())  # args[-1] keeps the buffers alive
    return out


@_grad_weight_op.register_kernel("cuda")
def _grad_weight_cuda(
    g: Tensor,
    u: Tensor,
    c: Tensor,
    c_scale: Tensor,
    vals: Tensor,
    idx: Tensor,
    scales: Tensor,
    d: int,
    block: int,
    bits: int,
) -> Tensor:
    out, args = _grad_weight_setup(g, u, c, c_scale, vals, idx, scales, d, block, bits)
    if args is None:
        return out
    lib = _cuda()
    n, k, m = args[3], args[6], args[10]
    n_ws = lib.residual_grad_workspace(n, d, block, k, m)
    ws = torch.empty(n_ws, dtype=torch.float32, device=g.device) if n_ws else None
    lib.residual_grad(*args[:-1], workspace=0 if ws is None else ws.data_ptr(), where=_cuda_exec(g))
    return out


def _check_g(g: Tensor, c: Tensor, n: int) -> None:
    _tensor("g", g, 2, tuple(_X_DTYPES))
    _same_device("c", c, g=g)
    if g.shape[0] != n:
        raise ValueError(f"g: expected {n} rows (one per stored activation row), got shape {tuple(g.shape)}")


@_grad_weight_op.register_fake
def _grad_weight_fake(
    g: Tensor,
    u: Tensor,
    c: Tensor,
    c_scale: Tensor,
    vals: Tensor,
    idx: Tensor,
    scales: Tensor,
    d: int,
    block: int,
    bits: int,
) -> Tensor:
    n, _, _, _ = _check_factors(u, c, c_scale, vals, idx, scales, d, block, bits)
    _check_g(g, c, n)
    return g.new_empty((g.shape[1], d), dtype=torch.float32)


def grad_weight(
    g: Tensor,
    u: Tensor,
    c: Tensor,
    c_scale: Tensor,
    vals: Tensor,
    idx: Tensor,
    scales: Tensor,
    *,
    d: int,
    block: int,
    bits: int,
) -> Tensor:
    """Weight gradient of a Linear from its compressed input: ``(Gᵀ·deq(C))·Uᵀ + Gᵀ·R``.

    Parameters
    ----------
    g : Tensor (n, m), float32 / bfloat16 / float16
        Gradient of the Linear's output (flattened like the input).
    u, c, c_scale, vals, idx, scales
        The basis and the factors returned by :func:`compress` (same device as ``g``).
    d, block, bits : int
        Feature count, residual block length and value bits used by :func:`compress`.

    Returns
    -------
    Tensor (m, d) float32, accumulated in float32; the dense activation is never rebuilt (the residual is a
    segmented scatter). Raises TypeError / ValueError naming the offending argument.
    """
    _int("d", d, 1, 2**62)
    _check_block_bits(block, bits)
    _are_tensors(g=g, u=u, c=c, c_scale=c_scale, vals=vals, idx=idx, scales=scales)
    out: Tensor = _grad_weight_op(g, u, c, c_scale, vals, idx, scales, d, block, bits)
    return out


# --------------------------------------------------------------------------------------------------------
# decompress


def _decompress_setup(
    u: Tensor, c: Tensor, c_scale: Tensor, vals: Tensor, idx: Tensor, scales: Tensor, d: int, block: int, bits: int
) -> tuple[Tensor, tuple[Any, ...] | None]:
    """Checks and ``deq(C)·Uᵀ`` on c's device: ``(out, scatter-kernel arguments or None)``."""
    n, _, _, k = _check_factors(u, c, c_scale, vals, idx, scales, d, block, bits)
    out = _mm32(_coef_dequant(c, c_scale), u.t()).contiguous()
    if k == 0 or n == 0:
        return out, None
    vc, ic, sc = vals.contiguous(), idx.contiguous(), scales.contiguous()
    return out, (vc.data_ptr(), ic.data_ptr(), sc.data_ptr(), n, d, block, k, bits, out.data_ptr(), d, (vc, ic, sc))


@torch.library.custom_op("thrifty::stac_decompress", mutates_args=(), device_types="cpu")
def _decompress_op(
    u: Tensor, c: Tensor, c_scale: Tensor, vals: Tensor, idx: Tensor, scales: Tensor, d: int, block: int, bits: int
) -> Tensor:
    out, args = _decompress_setup(u, c, c_scale, vals, idx, scales, d, block, bits)
    if args is None:
        return out
    if (lib := _cpu_or_fallback()) is None:
        vc, ic, sc = args[-1]
        out += _fallback_dense_residual(vc, ic, sc, d, block, bits)
    else:
        lib.residual_scatter(*args[:-1], where=_cpu_exec())  # args[-1] keeps the buffers alive
    return out


@_decompress_op.register_kernel("cuda")
def _decompress_cuda(
    u: Tensor, c: Tensor, c_scale: Tensor, vals: Tensor, idx: Tensor, scales: Tensor, d: int, block: int, bits: int
) -> Tensor:
    out, args = _decompress_setup(u, c, c_scale, vals, idx, scales, d, block, bits)
    if args is not None:
        _cuda().residual_scatter(*args[:-1], where=_cuda_exec(c))
    return out


@_decompress_op.register_fake
def _decompress_fake(
    u: Tensor, c: Tensor, c_scale: Tensor, vals: Tensor, idx: Tensor, scales: Tensor, d: int, block: int, bits: int
) -> Tensor:
    n, _, _, _ = _check_factors(u, c, c_scale, vals, idx, scales, d, block, bits)
    return c.new_empty((n, d), dtype=torch.float32)


def decompress(
    u: Tensor,
    c: Tensor,
    c_scale: Tensor,
    vals: Tensor,
    idx: Tensor,
    scales: Tensor,
    *,
    d: int,
    block: int,
    bits: int,
) -> Tensor:
    """Dequantize-scatter: ``X̂ = deq(C)·Uᵀ + R`` as a float32 ``(n, d)`` tensor (debugging, hook paths).

    Arguments as for :func:`grad_weight` (without ``g``). Raises TypeError / ValueError naming the argument.
    """
    _int("d", d, 1, 2**62)
    _check_block_bits(block, bits)
    _are_tensors(u=u, c=c, c_scale=c_scale, vals=vals, idx=idx, scales=scales)
    out: Tensor = _decompress_op(u, c, c_scale, vals, idx, scales, d, block, bits)
    return out


# --------------------------------------------------------------------------------------------------------
# refresh


@torch.library.custom_op("thrifty::stac_refresh", mutates_args=(), device_types=("cpu", "cuda"))  # torch ops only
def _refresh_op(x: Tensor, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    _check_refresh(x, u)
    with torch.autocast(device_type=x.device.type, enabled=False):
        x32 = x if x.dtype == torch.float32 else x.to(torch.float32)
        y = _mm32(x32.t(), _mm32(x32, u))  # Xᵀ(X·U), (d, r)
        # Householder (orthonormal even when Y is rank deficient): geqrf + orgqr, the calls linalg.qr makes,
        # without forming R (its triu copy was ~10% of the QR's time on the benchmark GPT)
        a, tau = torch.geqrf(y)
        q = torch.linalg.householder_product(a, tau).contiguous()
        xq = _mm32(x32, q)
        total = torch.linalg.vector_norm(x32).square()
        captured = torch.linalg.vector_norm(xq).square()
        energy = torch.where(total == 0, 1.0, captured / total)  # NaN input stays NaN (reported by refresh)
    return q, energy.to(torch.float32), xq


def _check_refresh(x: Tensor, u: Tensor) -> None:
    _tensor("x", x, 2, tuple(_X_DTYPES))
    _tensor("u", u, 2, (torch.float32,))
    _same_device("x", x, u=u)
    if u.shape[0] != x.shape[1]:
        raise ValueError(f"u: expected {x.shape[1]} rows (x has {x.shape[1]} features), got shape {tuple(u.shape)}")
    if not 1 <= u.shape[1] <= x.shape[1]:
        raise ValueError(f"u: needs between 1 and {x.shape[1]} columns, got {u.shape[1]}")


@_refresh_op.register_fake
def _refresh_fake(x: Tensor, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    _check_refresh(x, u)
    return (
        u.new_empty(u.shape),
        u.new_empty((), dtype=torch.float32),
        u.new_empty((x.shape[0], u.shape[1])),
    )


class Refreshed(NamedTuple):
    """Output of :func:`refresh` with ``return_projection=True``."""

    u: Tensor
    energy: float
    xu: Tensor


def refresh(x: Tensor, u: Tensor, *, return_projection: bool = False) -> Any:
    """One warm-started subspace iteration: ``U_new = orth(Xᵀ(X·U))`` and its captured energy.

    Parameters
    ----------
    x : Tensor (n, d), float32 / bfloat16 / float16
        The batch whose dominant subspace is tracked.
    u : Tensor (d, r) float32, 1 <= r <= d, same device
        The previous basis (orthonormal columns; any full-rank start works).
    return_projection : bool
        Also return ``X·U_new`` (float32 (n, r)), which :func:`compress` accepts as ``xu=`` to skip its GEMM.

    Returns
    -------
    ``(u_new, energy)`` or ``Refreshed(u_new, energy, xu)``: ``u_new`` (d, r) float32 with orthonormal columns
    (Householder QR, so rank-deficient batches are fine), ``energy = ‖X·U_new‖² / ‖X‖²`` as a float in [0, 1]
    (1.0 for an all-zero batch; reading it synchronises a CUDA stream).
    """
    _are_tensors(x=x, u=u)
    q, energy, xq = _refresh_op(x, u)
    e = float(energy)
    if not math.isfinite(e):
        raise ValueError("x: contains NaN or infinity")
    if return_projection:
        return Refreshed(q, e, xq)
    return q, e
