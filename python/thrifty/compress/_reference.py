"""NumPy references of the STAC-R kernels' numerical contract (slow, written for clarity).

Used by the tests as the oracle of the compiled kernels, and by ``_kernels`` as the CPU fallback only when
no CPU kernel library (``thrifty/libthrifty_stac_cpu*.so``) can be loaded.

The compiled kernels (``libthrifty_stac_cpu*.so`` and ``libthrifty_stac_cuda.so``, loaded by ``_native``) must equal :func:`compress` bit for
bit, and :func:`grad_weight` / :func:`decompress` (computed here in float64) to rounding error. Every
rounding step is spelled out as one IEEE float32 operation, in the order the kernels use:

- coefficients ``c`` from ``xu = X·U`` (float32): ``fp32`` as is; ``bf16`` round to nearest even; ``int8``
  with ``c_scale[i] = max_t |xu[i, t]| / 127`` and ``q = round_half_away(xu / c_scale)``;
  ``deq(c) = q * c_scale`` (one float32 multiply).
- residual ``E[i, j] = x[i, j] - acc`` with ``acc = sum_t deq(c)[i, t] * u[j, t]`` accumulated for
  ``t = 0, 1, ..., r-1`` in float32, one multiply and one add per step (no fused multiply-add).
- per row and block of ``block`` features (the last block may be short; ``kk = min(k, its length)``): keep
  the ``kk`` entries of largest ``|E|`` (ties: lower index), in ascending index order; ``scale =
  max|kept| / qmax`` (``qmax`` 127 for 8 bits, 7 for 4 bits), ``y = kept / scale`` (float32 division);
  deterministic ``q = round_half_away(y)``, stochastic ``q = floor(fl32(y + u))`` with ``u`` from
  :func:`uniform01`; ``q`` clamped to ``[-qmax, qmax]``; a zero scale gives ``q = 0``.
- packing: ``idx`` uint8 ``(n, nb, k)``; ``vals`` int8 ``(n, nb, k)`` or, for 4 bits, uint8
  ``(n, nb, ceil(k/2))`` with slot ``2s`` in the low nibble; slots ``kk..k-1`` hold index 0 and value 0.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)

F32 = NDArray[np.float32]


def _mix64(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return out


def uniform01(seed: int, rows: NDArray[np.int64], cols: NDArray[np.int64]) -> F32:
    """Counter-based uniforms in [0, 1) on a 2^-24 grid keyed by (seed, row, global column).

    ``rows`` and ``cols`` broadcast against each other; ``seed`` is taken modulo 2^64.
    """
    with np.errstate(over="ignore"):
        s = np.asarray(seed % (1 << 64), dtype=np.uint64)
        r = np.asarray(rows).astype(np.uint64)
        c = np.asarray(cols).astype(np.uint64)
        h = _mix64(s + np.uint64(0x9E3779B97F4A7C15) * (r + np.uint64(1)))
        h = _mix64(h ^ (np.uint64(0xD1B54A32D192ED03) * (c + np.uint64(1))))
    out: F32 = ((h >> np.uint64(40)).astype(np.float64) * 2.0**-24).astype(np.float32)
    return out


def round_half_away(y: F32) -> F32:
    """Round float32 values half away from zero (exact: computed in float64)."""
    y64 = y.astype(np.float64)
    return np.trunc(y64 + np.copysign(0.5, y64)).astype(np.float32)


def bf16_round(v: F32) -> F32:
    """float32 -> bfloat16 (round to nearest even) -> float32."""
    b = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    out: F32 = (b.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return out


def quantize(v: F32, scale: F32, qmax: float, stochastic: bool, u: F32 | None) -> NDArray[np.int64]:
    """Quantize ``v`` against a broadcastable ``scale`` (see the module docstring)."""
    safe = np.where(scale > 0, scale, np.float32(1)).astype(np.float32)
    y = (v.astype(np.float32) / safe).astype(np.float32)
    if stochastic:
        assert u is not None
        q = np.floor((y + u).astype(np.float32))
    else:
        q = round_half_away(y)
    q = np.clip(q, -qmax, qmax)
    return np.where(scale > 0, q, 0).astype(np.int64)


def quantize_coef(xu: F32, coef: str) -> tuple[NDArray[np.generic], F32, F32]:
    """Stored coefficients, their scales (empty for float formats) and deq(c) as float32."""
    xu = np.asarray(xu, dtype=np.float32)
    if coef == "fp32":
        return xu.copy(), np.zeros(0, np.float32), xu.copy()
    if coef == "bf16":
        deq = bf16_round(xu)
        return deq.copy(), np.zeros(0, np.float32), deq
    if coef == "int8":
        amax = np.abs(xu).max(axis=1) if xu.shape[1] else np.zeros(xu.shape[0], np.float32)
        scale = (amax.astype(np.float32) / np.float32(127)).astype(np.float32)
        q = quantize(xu, scale[:, None], 127.0, False, None)
        deq = (q.astype(np.float32) * scale[:, None]).astype(np.float32)
        return q.astype(np.int8), scale, deq
    raise ValueError(f"coef: unknown format {coef!r}")


def residual(x: F32, u: F32, cdeq: F32) -> F32:
    """E = X - deq(C)·Uᵀ accumulated over t in order, float32, no fused multiply-add."""
    acc = np.zeros(x.shape, np.float32)
    for t in range(u.shape[1]):
        acc = (acc + (cdeq[:, t : t + 1] * u[None, :, t]).astype(np.float32)).astype(np.float32)
    return (x.astype(np.float32) - acc).astype(np.float32)


def compress(
    x: F32,
    u: F32,
    xu: F32,
    *,
    coef: str,
    block: int,
    k: int,
    bits: int,
    stochastic: bool = False,
    seed: int = 0,
) -> tuple[NDArray[np.generic], F32, NDArray[np.generic], NDArray[np.uint8], F32]:
    """Reference of ``thrifty.compress._kernels.compress`` given ``xu = X·U`` (float32, as the kernel gets it).

    Returns ``(c, c_scale, vals, idx, scales)`` with the dtypes and shapes of the kernel's outputs
    (``c`` of a ``bf16`` format is returned as its float32 value).
    """
    x = np.asarray(x, dtype=np.float32)
    n, d = x.shape
    nb = -(-d // block)
    c, c_scale, cdeq = quantize_coef(xu, coef)
    qmax = 127.0 if bits == 8 else 7.0
    idx = np.zeros((n, nb, k), np.uint8)
    q_all = np.zeros((n, nb, k), np.int64)
    scales = np.zeros((n, nb) if k > 0 else (n, 0), np.float32)
    if k > 0 and n > 0:
        e = residual(x, np.asarray(u, dtype=np.float32), cdeq)
        rows = np.arange(n)[:, None]
        for b in range(nb):
            j0 = b * block
            eb = e[:, j0 : j0 + block]
            length = eb.shape[1]
            kk = min(k, length)
            absbits = np.abs(eb).view(np.uint32).astype(np.uint64)
            key = (absbits << np.uint64(8)) | (np.uint64(255) - np.arange(length, dtype=np.uint64))[None, :]
            top = np.sort(_neg_order(key)[:, :kk], axis=1)
            kept = np.take_along_axis(eb, top, axis=1)
            amax = np.abs(kept).max(axis=1) if kk else np.zeros(n, np.float32)
            scale = (amax.astype(np.float32) / np.float32(qmax)).astype(np.float32)
            u01 = uniform01(seed, rows, j0 + top) if stochastic else None
            q = quantize(kept, scale[:, None], qmax, stochastic, u01)
            idx[:, b, :kk] = top
            q_all[:, b, :kk] = q
            scales[:, b] = scale
    if bits == 8:
        vals: NDArray[np.generic] = q_all.astype(np.int8)
    else:
        nib = (q_all & 0xF).astype(np.uint8)
        if k % 2:
            nib = np.concatenate([nib, np.zeros((n, nb, 1), np.uint8)], axis=2)
        vals = (nib[:, :, 0::2] | (nib[:, :, 1::2] << np.uint8(4))).astype(np.uint8)
    return c, c_scale, vals, idx, scales


def _neg_order(key: NDArray[np.uint64]) -> NDArray[np.intp]:
    """Column order of each row by descending key (keys are distinct within a row)."""
    return np.argsort(key, axis=1, kind="stable")[:, ::-1]


def unpack_vals(vals: NDArray[np.generic], k: int, bits: int) -> NDArray[np.int64]:
    """Signed quantized values (n, nb, k) from packed int8 / two-nibble uint8 storage."""
    if bits == 8:
        return np.asarray(vals).astype(np.int8).astype(np.int64)
    v = np.asarray(vals).astype(np.uint8)
    lo = (v & 0xF).astype(np.int64)
    hi = (v >> 4).astype(np.int64)
    both = np.stack([lo, hi], axis=-1).reshape(v.shape[0], v.shape[1], -1)[:, :, :k]
    return (both ^ 8) - 8


def dense_residual(
    vals: NDArray[np.generic], idx: NDArray[np.uint8], scales: F32, *, d: int, block: int, bits: int
) -> NDArray[np.float64]:
    """The sparse residual R as a dense float64 (n, d) array (values q * scale rounded to float32)."""
    n, nb, k = idx.shape
    out = np.zeros((n, d), np.float64)
    if k == 0:
        return out
    q = unpack_vals(vals, k, bits)
    for b in range(nb):
        kk = min(k, d - b * block)
        v = (q[:, b, :kk].astype(np.float32) * scales[:, b : b + 1]).astype(np.float32)
        cols = b * block + idx[:, b, :kk].astype(np.int64)
        np.add.at(out, (np.arange(n)[:, None].repeat(kk, 1), cols), v.astype(np.float64))
    return out


def coef_dequant(c: NDArray[np.generic], c_scale: F32, coef: str) -> F32:
    """deq(c) as float32 (int8: one float32 multiply by the row scale)."""
    if coef == "int8":
        return (np.asarray(c).astype(np.float32) * c_scale[:, None]).astype(np.float32)
    return np.asarray(c, dtype=np.float32)


def decompress(
    u: F32,
    cdeq: F32,
    vals: NDArray[np.generic],
    idx: NDArray[np.uint8],
    scales: F32,
    *,
    d: int,
    block: int,
    bits: int,
) -> NDArray[np.float64]:
    """X̂ = deq(C)·Uᵀ + R in float64."""
    low: NDArray[np.float64] = cdeq.astype(np.float64) @ u.astype(np.float64).T
    return low + dense_residual(vals, idx, scales, d=d, block=block, bits=bits)


def grad_weight(
    g: F32,
    u: F32,
    cdeq: F32,
    vals: NDArray[np.generic],
    idx: NDArray[np.uint8],
    scales: F32,
    *,
    d: int,
    block: int,
    bits: int,
) -> NDArray[np.float64]:
    """(Gᵀ·deq(C))·Uᵀ + Gᵀ·R in float64."""
    g64 = g.astype(np.float64)
    low: NDArray[np.float64] = (g64.T @ cdeq.astype(np.float64)) @ u.astype(np.float64).T
    sparse: NDArray[np.float64] = g64.T @ dense_residual(vals, idx, scales, d=d, block=block, bits=bits)
    return low + sparse
