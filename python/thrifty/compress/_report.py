"""`compression_report`: per compressed layer, stored bytes against the dense input, the plan, and the
measured gradient error with its cosine bound (the gradient bridge)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, overload

from torch import nn

from thrifty.compress._linear import CompressedLinear

__all__ = ["CompressionReport", "LayerReport", "compression_report"]


@dataclass(frozen=True)
class LayerReport:
    """One compressed layer, as measured in its last step.

    Attributes
    ----------
    name : str
        Module name in the model.
    in_features, out_features : int
        Width ``d`` of the saved input and of the output.
    exact : bool
        Whether the layer runs the exactness switch.
    rank : int or None
        Basis rank ``r`` (None before the first forward of a budget-planned layer).
    coef_dtype : str or None
        "fp32", "bf16" or "int8".
    residual_density : float or None
        Kept share of entries per residual block (``k / block``; 0.0 without residual).
    residual_bits : int or None
        4 or 8 (None without residual).
    rows : int
        Rows ``n`` of the last batch.
    stored_bytes, dense_bytes : int
        Saved factor bytes and dense input bytes (``n·d·itemsize``) of the last batch.
    ratio : float
        ``dense_bytes / stored_bytes`` (NaN before the first forward).
    basis_bytes : int
        Bytes of the persistent basis ``U`` (float32 layer state, shared by all steps; 0 before planning).
    captured_energy : float
        ``‖X U‖² / ‖X‖²`` of the batch of the last basis refresh (on the monitor's sampled rows when the
        codec has not measured it).
    rel_error : float
        ``‖X_s − X̂_s‖ / ‖X_s‖`` on the sampled rows (after coefficients and residual).
    eps : float
        Gradient-error estimate ``ε = ‖G_sᵀ E_s‖ / ‖G_sᵀ X_s‖`` measured in backward on the sampled rows.
    cos_bound : float
        ``√(1 − ε²)`` (0 when ``ε >= 1``): a lower bound on the cosine between the compressed and the
        exact weight gradient of the sampled rows.
    cos_sample : float
        The measured cosine on the same rows (always ``>= cos_bound``).
    step, eps_step : int
        Steps seen by the layer and the step at which ``eps`` was measured (-1: never; then the ε fields
        are NaN).
    """

    name: str
    in_features: int
    out_features: int
    exact: bool
    rank: int | None
    coef_dtype: str | None
    residual_density: float | None
    residual_bits: int | None
    rows: int
    stored_bytes: int
    dense_bytes: int
    ratio: float
    basis_bytes: int
    captured_energy: float
    rel_error: float
    eps: float
    cos_bound: float
    cos_sample: float
    step: int
    eps_step: int


_COLUMNS = (
    ("layer", "name", "{}"),
    ("d", "in_features", "{}"),
    ("rank", "rank", "{}"),
    ("coef", "coef_dtype", "{}"),
    ("density", "residual_density", "{:.3f}"),
    ("bits", "residual_bits", "{}"),
    ("stored B", "stored_bytes", "{:,}"),
    ("dense B", "dense_bytes", "{:,}"),
    ("ratio", "ratio", "{:.2f}"),
    ("basis B", "basis_bytes", "{:,}"),
    ("energy", "captured_energy", "{:.4f}"),
    ("eps", "eps", "{:.4f}"),
    ("cos>=", "cos_bound", "{:.4f}"),
    ("cos", "cos_sample", "{:.4f}"),
)


def _cell(fmt: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


@dataclass(frozen=True)
class CompressionReport:
    """Rows of :class:`LayerReport`, one per compressed layer, with totals.

    Iterable, indexable by position or layer name, ``len()``-able; ``repr()`` prints a table;
    :meth:`to_records` gives a list of dicts (e.g. for ``pandas.DataFrame``).

    Attributes
    ----------
    layers : tuple of LayerReport
    stored_bytes, dense_bytes : int
        Totals over the layers (last batch).
    basis_bytes : int
        Total bytes of the layers' bases (persistent state like a weight, not per batch).
    ratio : float
        ``dense_bytes / stored_bytes`` over all layers (NaN before the first forward).
    """

    layers: tuple[LayerReport, ...]

    @property
    def stored_bytes(self) -> int:
        return sum(layer.stored_bytes for layer in self.layers)

    @property
    def dense_bytes(self) -> int:
        return sum(layer.dense_bytes for layer in self.layers)

    @property
    def basis_bytes(self) -> int:
        return sum(layer.basis_bytes for layer in self.layers)

    @property
    def ratio(self) -> float:
        stored = self.stored_bytes
        return self.dense_bytes / stored if stored > 0 else math.nan

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per layer with the fields of :class:`LayerReport`."""
        return [asdict(layer) for layer in self.layers]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[LayerReport]:
        return iter(self.layers)

    @overload
    def __getitem__(self, key: int) -> LayerReport: ...

    @overload
    def __getitem__(self, key: str) -> LayerReport: ...

    def __getitem__(self, key: int | str) -> LayerReport:
        if isinstance(key, str):
            for layer in self.layers:
                if layer.name == key:
                    return layer
            raise KeyError(key)
        return self.layers[key]

    def __repr__(self) -> str:
        head = [title for title, _, _ in _COLUMNS]
        body = [[_cell(fmt, getattr(layer, attr)) for _, attr, fmt in _COLUMNS] for layer in self.layers]
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
        lines = [
            "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            for row in [head, *body]
        ]
        total = f"total: {self.stored_bytes:,} B stored for {self.dense_bytes:,} B dense"
        if self.stored_bytes > 0:
            total += f" (ratio {self.ratio:.2f})"
        total += f"; bases (layer state, not per batch): {self.basis_bytes:,} B"
        return "\n".join(["CompressionReport", *lines, total])


def compression_report(model: nn.Module) -> CompressionReport:
    """Per compressed layer: stored against dense bytes, rank, residual, captured energy and ε.

    Reads what each :class:`CompressedLinear` measured in its last forward and backward; it runs nothing.
    The byte counts are exact (the factors of the last batch); ``captured_energy``, ``eps``, ``cos_bound``
    and ``cos_sample`` come from the layer's monitor, which keeps ``monitor_rows`` sampled rows of the
    input and of its compression error ``E`` and measures ``ε = ‖G_sᵀE_s‖/‖G_sᵀX_s‖`` in backward with one
    small extra GEMM. Since ``ĝ − g = Gᵀ·E``, ``cos(ĝ, g) ≥ √(1 − ε²)`` whenever ``ε < 1``.

    Parameters
    ----------
    model : torch.nn.Module
        A model wrapped by :func:`~thrifty.compress.stac_r` (or a :class:`CompressedLinear`).

    Returns
    -------
    CompressionReport
        One :class:`LayerReport` per compressed layer, in module order (empty when there is none).

    Raises
    ------
    TypeError
        ``model`` is not an ``nn.Module``.

    Examples
    --------
    >>> import torch
    >>> from thrifty.compress import stac_r, compression_report
    >>> _ = torch.manual_seed(0)
    >>> model = stac_r(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4)))
    >>> model(torch.randn(256, 64)).square().sum().backward()
    >>> report = compression_report(model)
    >>> len(report), report[0].ratio > 1
    (2, True)
    >>> all(r.cos_sample >= r.cos_bound - 1e-6 for r in report)
    True
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    rows = [_layer_report(name, module) for name, module in model.named_modules() if isinstance(module, CompressedLinear)]
    return CompressionReport(tuple(rows))


def _layer_report(name: str, layer: CompressedLinear) -> LayerReport:
    cfg = layer.config
    st = layer.state
    if cfg is None:
        rank = coef = bits = None
        density: float | None = None
        basis_bytes = 0
    else:
        rank, coef = int(cfg.rank), str(cfg.coef)
        density = cfg.k / min(cfg.block, layer.in_features) if cfg.k > 0 else 0.0
        bits = int(cfg.bits) if cfg.k > 0 else None
        basis_bytes = layer.codec.state_bytes
    energy = st.captured_energy
    if cfg is not None and layer.codec.step > 0:
        whole_batch = layer.codec.stats.captured_energy  # measured on the whole batch at the last refresh
        energy = energy if math.isnan(whole_batch) else whole_batch
    eps = st.eps
    cos_bound = math.sqrt(max(0.0, 1.0 - eps * eps)) if not math.isnan(eps) else math.nan
    return LayerReport(
        name=name or "(model)",
        in_features=layer.in_features,
        out_features=layer.out_features,
        exact=layer.exact,
        rank=rank,
        coef_dtype=coef,
        residual_density=density,
        residual_bits=bits,
        rows=st.rows,
        stored_bytes=st.stored_bytes,
        dense_bytes=st.dense_bytes,
        ratio=st.dense_bytes / st.stored_bytes if st.stored_bytes > 0 else math.nan,
        basis_bytes=basis_bytes,
        captured_energy=energy,
        rel_error=st.rel_error,
        eps=eps,
        cos_bound=cos_bound,
        cos_sample=st.cos_sample,
        step=st.step,
        eps_step=st.eps_step,
    )

