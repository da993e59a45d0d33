"""`predict`: the Saved-Surface Predictor (SSP) — what STAC-R will do to the peak memory, before training.

Compressing activations does not always move the peak: a saved tensor only goes away when *every* autograd
node that saved it lets go. ``predict`` runs one forward and backward on a dry-run batch (no optimizer step;
gradients, buffers, RNG state and module modes are restored), walks the autograd graph's saved tensors and
groups them by storage (views and repeated saves of one storage count once). Then

- the replaceable surface ``A_C⁺`` is the bytes of the storages whose every consumer is the weight gradient
  of a selectable ``nn.Linear`` (``AddmmBackward0.mat1`` / ``MmBackward0.self`` of that layer);
- the peak ``P`` = parameters (and buffers) + gradients + optimizer state + the saved activations at the end
  of the forward + the largest backward transient (modelled as twice the largest saved storage, or a
  Linear's output-plus-input gradient if larger);
- ``SSP = A_C⁺ / P`` is the upper bound on the peak reduction STAC-R can give;
- every replaceable storage is planned with the layer codec STAC-R uses (same data, same plan, same basis):
  wrapping its ``k`` consumer layers frees its bytes ``B`` and adds ``k`` compressed copies plus ``k``
  bases; storages with ``B − Σ(copy + basis) ≤ 0`` are refused (net loss), as are storages another op also
  keeps alive (a co-consumer: wrapping adds a copy and frees nothing);
- the gradient bridge: for each planned layer, the reconstruction error ``E = X − X̂`` of the batch and
  the output gradient ``G`` give ``ε = ‖GᵀE‖/‖GᵀX‖`` and the bound ``cos(ĝ, g) ≥ √(1 − ε²)``, checked
  against the cosine of the weight gradient ``ĝ`` the kernels compute from the factors.

:func:`~thrifty.compress.stac_r` with ``plan=report`` wraps exactly the accepted layers with the plans and
bases of the report.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import torch
from torch import Tensor, nn

from thrifty._warn import warn
from thrifty.compress import _checks, _kernels
from thrifty.compress._adapters import adapter_for
from thrifty.compress._codec import LayerCodec, LayerConfig, budget_layout
from thrifty.compress._lean_plan import LeanPrediction, LeanProbe
from thrifty.compress._linear import DEFAULT_COMPUTE_BUDGET, CompressedLinear, compute_cap
from thrifty.compress._meter import has_data, storage_key
from thrifty.compress._select import select_layers

__all__ = ["LayerPrediction", "PredictConfig", "SSPReport", "predict"]

_Key = tuple[str, int, int]
# autograd nodes and the attribute that holds a Linear's input (the weight-gradient operand)
_LINEAR_INPUT = {("AddmmBackward0", "_saved_mat1"), ("MmBackward0", "_saved_self")}
_PASS_THROUGH = ("ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "AddBackward0", "AsStridedBackward0")
_STATE_PER_PARAM = {"Adam": 2, "AdamW": 2, "SGD": 0}


@dataclass(frozen=True)
class PredictConfig:
    """What to predict for.

    Attributes
    ----------
    ratio : float > 1, default=8
        The STAC-R stored-bytes ratio (as in :func:`~thrifty.compress.stac_r`).
    layers : None, str, iterable of str or callable
        The candidate layers, selected as ``stac_r(layers=...)`` does (None: every ``nn.Linear``).
    plan_all : bool or iterable of str, default=False
        Plan every candidate (True) or these named ones, also when certain to lose memory (the planner's cost
        for a wide layer is an eigendecomposition of its ``d × d`` input Gram matrix). Needed to predict a
        forced wrapping of such layers with :meth:`SSPReport.predicted_change`.
    train : bool, default=True
        Run the dry run in training mode (dropout on); the modules' modes are restored afterwards.
    compute_budget : float > 0, default=0.25
        The compute cap of the plan, as ``stac_r(compute_budget=...)`` (rank at most
        ``max(32, compute_budget · out_features)``, with its fidelity floor; ``math.inf`` = no cap), so the
        predicted bytes are those of the plan ``stac_r`` builds with the same argument.
    lean : bool, default=False
        Also count what the library replaces by itself, exactly (:attr:`SSPReport.lean`): every composite
        tanh-GELU (:func:`~thrifty.compress.lean_activations`) and, for a transformers causal LM with the
        default loss, the full-vocabulary loss (:func:`~thrifty.compress.lean_loss`; the head is then not a
        compression candidate: the chunked loss keeps its input). Their freed bytes join ``A_C⁺`` and the
        predicted saving; apply them (``lean_loss(lean_activations(model))``) before ``stac_r(plan=report)``.
    """

    ratio: float = 8.0
    layers: Any = None
    plan_all: bool | tuple[str, ...] = False
    train: bool = True
    compute_budget: float = DEFAULT_COMPUTE_BUDGET
    lean: bool = False


@dataclass(frozen=True)
class LayerPrediction:
    """One candidate Linear layer (rows of :class:`SSPReport`).

    Attributes
    ----------
    name : str
    in_features, out_features, rows : int
        Width of the saved input, of the output, and rows ``n`` of the batch (all calls summed).
    input_bytes : int
        Bytes of the storage holding the layer's saved input (0 when not saved).
    shared_with : tuple of str
        Other candidate Linears whose weight gradient saves the same storage (one compressed copy each).
    co_consumers : tuple of str
        Other saves of that storage (``"NodeName.attribute"``, or a Linear that is not a candidate).
    accepted : bool
        Whether wrapping this layer (together with ``shared_with``) lowers the peak.
    reason : str
        Why it is refused (or "net saving").
    rank, coef_dtype, residual_density, residual_bits
        The layer plan (None when not planned).
    stored_bytes, basis_bytes : int
        Predicted factor bytes of this batch and bytes of the layer's basis (0 when not planned).
    net_saving : int
        This layer's share of the storage's net saving: ``input_bytes / k − stored_bytes − basis_bytes``.
    rel_error, eps, cos_bound, cos : float
        Gradient bridge on the batch: ``‖E‖/‖X‖``, ``ε = ‖GᵀE‖/‖GᵀX‖``, ``√(1 − ε²)`` and the measured
        cosine of the compressed weight gradient with the exact one (NaN when not planned).
    overhead_flops : int
        Predicted extra floating-point operations per step of the compressed layer (negative: fewer).
    """

    name: str
    in_features: int
    out_features: int
    rows: int
    input_bytes: int
    shared_with: tuple[str, ...]
    co_consumers: tuple[str, ...]
    accepted: bool
    reason: str
    rank: int | None = None
    coef_dtype: str | None = None
    residual_density: float | None = None
    residual_bits: int | None = None
    stored_bytes: int = 0
    basis_bytes: int = 0
    net_saving: int = 0
    rel_error: float = math.nan
    eps: float = math.nan
    cos_bound: float = math.nan
    cos: float = math.nan
    overhead_flops: int = 0


def _fmt_bytes(n: float) -> str:
    sign = "-" if n < 0 else ""
    n = abs(float(n))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024
    return f"{sign}{n:.1f} GiB"


def _cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


@dataclass(frozen=True)
class SSPReport:
    """The Saved-Surface Predictor's answer for one model, batch, optimizer and configuration.

    Attributes
    ----------
    layers : tuple of LayerPrediction
        One row per candidate layer, in module order.
    config : PredictConfig
    optimizer : str
        The optimizer the state bytes were computed for (what was assumed, for an unknown one).
    param_bytes, batch_bytes, grad_bytes, optimizer_bytes, saved_bytes, transient_bytes : int
        The terms of the peak ``P`` (parameters include buffers; ``saved_bytes`` are the distinct saved
        storages at the end of the forward, parameters and the batch's own tensors excluded).
    surface_bytes : int
        ``A_C⁺``: saved bytes whose every consumer is a candidate Linear's weight gradient (with
        ``config.lean``: plus the bytes the lean pieces free).
    saved_by : dict[str, int]
        Saved bytes by the kind of the storage's first consumer (``"Linear input"`` or the node name).
    base_flops : int
        Forward+backward FLOPs of the model's Linears on the batch (``6·n·d·m`` each).
    layouts : str
        Where the layer layouts come from: ``"planned on the batch"`` (the codec STAC-R uses, on the batch's
        activations), or the byte budget alone for a meta-device run (no activations: the bytes of every
        layout are exact, the choice among layouts of one budget and the gradient bridge need real data).
    lean : tuple of LeanPrediction
        With ``config.lean``: the exact pieces the library replaces by itself (tanh-GELUs, the loss), their
        saved and freed bytes and fidelity model; their freed bytes are in ``predicted_saving``.

    Properties: ``peak_bytes`` (P), ``ssp`` (A_C⁺/P), ``fixed_bytes`` (P without the saved bytes),
    ``predicted_saving`` (bytes), ``predicted_peak``, ``predicted_reduction`` (fraction of P),
    ``predicted_overhead`` (extra Linear FLOPs / base Linear FLOPs), ``accepted`` (layer names).
    ``print(report)`` shows a table; :meth:`to_records` gives one dict per layer; :meth:`plot` draws the
    per-layer surface.
    """

    layers: tuple[LayerPrediction, ...]
    config: PredictConfig
    optimizer: str
    param_bytes: int
    batch_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    saved_bytes: int
    transient_bytes: int
    surface_bytes: int
    saved_by: dict[str, int]
    base_flops: int
    layouts: str = "planned on the batch"
    lean: tuple[LeanPrediction, ...] = ()
    _codecs: dict[str, LayerCodec] = field(default_factory=dict, repr=False, compare=False)
    _storage_of: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)
    _storage_bytes: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    _kept: frozenset[int] = field(default_factory=frozenset, repr=False, compare=False)

    # -- headline numbers --------------------------------------------------------------------------
    @property
    def fixed_bytes(self) -> int:
        """Parameters + batch + gradients + optimizer state + backward transient (P without the saved bytes)."""
        return self.param_bytes + self.batch_bytes + self.grad_bytes + self.optimizer_bytes + self.transient_bytes

    @property
    def peak_bytes(self) -> int:
        """The predicted peak ``P`` of a training step without compression."""
        return self.fixed_bytes + self.saved_bytes

    @property
    def ssp(self) -> float:
        """``A_C⁺ / P``: the most STAC-R could lower the peak (compressing the surface to nothing)."""
        return self.surface_bytes / self.peak_bytes if self.peak_bytes > 0 else 0.0

    @property
    def accepted(self) -> tuple[str, ...]:
        """Names of the layers to wrap."""
        return tuple(r.name for r in self.layers if r.accepted)

    @property
    def predicted_saving(self) -> int:
        """Bytes the accepted layers (and, with ``config.lean``, the lean pieces) take off the peak."""
        return sum(r.net_saving for r in self.layers if r.accepted) + self.lean_saving

    @property
    def lean_saving(self) -> int:
        """Bytes the lean pieces free (0 without ``config.lean``)."""
        return sum(r.freed_bytes for r in self.lean)

    @property
    def predicted_peak(self) -> int:
        return self.peak_bytes - self.predicted_saving

    @property
    def predicted_reduction(self) -> float:
        """Predicted peak reduction, a fraction of ``P`` (never above :attr:`ssp`)."""
        return self.predicted_saving / self.peak_bytes if self.peak_bytes > 0 else 0.0

    @property
    def predicted_overhead(self) -> float:
        """Predicted step-time overhead of the accepted layers: extra FLOPs / the Linears' FLOPs."""
        extra = sum(r.overhead_flops for r in self.layers if r.accepted)
        return extra / self.base_flops if self.base_flops > 0 else 0.0

    def predicted_change(self, layers: Iterable[str] | None = None) -> int:
        """Predicted change of the peak in bytes (negative: lower) when exactly ``layers`` are wrapped.

        ``None`` means the accepted layers. A storage is freed only when all its consumers are wrapped and
        no other op keeps it; every wrapped layer adds its compressed copy and basis.

        Raises
        ------
        ValueError
            A name is not a candidate, or was not planned (predict with ``PredictConfig(plan_all=True)``).
        """
        names = list(self.accepted if layers is None else layers)
        rows = {r.name: r for r in self.layers}
        for n in names:
            if n not in rows:
                raise ValueError(f"layers: {n!r} is not a candidate layer of this report")
            if n in rows and rows[n].input_bytes > 0 and n not in self._codecs:
                raise ValueError(
                    f"layers: {n!r} was not planned ({rows[n].reason}); predict with PredictConfig(plan_all=True)"
                )
        chosen = set(names)
        added = sum(rows[n].stored_bytes + rows[n].basis_bytes for n in chosen)
        freed = 0
        for sid, nbytes in self._storage_bytes.items():
            consumers = [n for n, ids in self._storage_of.items() if sid in ids]
            if sid not in self._kept and consumers and all(n in chosen for n in consumers):
                freed += nbytes
        return added - freed

    # -- views -------------------------------------------------------------------------------------
    def to_records(self) -> list[dict[str, Any]]:
        """One dict per candidate layer (the fields of :class:`LayerPrediction`), e.g. for ``pandas.DataFrame``."""
        return [asdict(r) for r in self.layers]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[LayerPrediction]:
        return iter(self.layers)

    def __getitem__(self, key: int | str) -> LayerPrediction:
        if isinstance(key, str):
            for r in self.layers:
                if r.name == key:
                    return r
            raise KeyError(key)
        return self.layers[key]

    def summary(self) -> str:
        """The headline lines of the report."""
        p = self.peak_bytes
        lines = [
            f"SSPReport (ratio {self.config.ratio:g}, optimizer {self.optimizer})",
            (
                f"  peak P = {_fmt_bytes(p)}: parameters {_fmt_bytes(self.param_bytes)}, batch "
                f"{_fmt_bytes(self.batch_bytes)}, gradients {_fmt_bytes(self.grad_bytes)}, optimizer state "
                f"{_fmt_bytes(self.optimizer_bytes)}, saved activations {_fmt_bytes(self.saved_bytes)}, "
                f"backward transient {_fmt_bytes(self.transient_bytes)}"
            ),
            (
                f"  replaceable surface A_C+ = {_fmt_bytes(self.surface_bytes)} -> SSP = A_C+/P = {100 * self.ssp:.1f}% "
                "(the most any Linear-input compression can take off the peak)"
            ),
            (
                f"  predicted: {len(self.accepted)}/{len(self.layers)} layers accepted, peak "
                f"{_fmt_bytes(p)} -> {_fmt_bytes(self.predicted_peak)} (-{100 * self.predicted_reduction:.1f}%), "
                f"step-time overhead ~{100 * self.predicted_overhead:+.1f}% of the Linears' FLOPs"
            ),
        ]
        if self.lean:
            kinds: dict[str, list[int]] = {}
            for r in self.lean:
                kinds.setdefault(r.kind.split(" (")[0] if r.name != "loss" else "loss", []).append(r.freed_bytes)
            lines.append(
                f"  lean pieces (exact, cos 1): {self.lean_saving / p:.1%} of P freed: "
                + ", ".join(f"{k} x{len(v)} {_fmt_bytes(sum(v))}" for k, v in kinds.items())
            )
        lines.append(f"  layouts: {self.layouts}")
        bridged = [r for r in self.layers if not math.isnan(r.cos)]
        if bridged:
            held = all(r.cos >= r.cos_bound - 1e-6 for r in bridged)
            mean_cos = sum(r.cos for r in bridged) / len(bridged)
            lines.append(
                f"  gradient bridge on this batch: mean cos {mean_cos:.4f}, bound cos >= sqrt(1-eps^2) "
                f"{'holds' if held else 'VIOLATED'} in {len(bridged)} planned layers"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        cols = (
            ("layer", "name", "{}"), ("d", "in_features", "{}"), ("n", "rows", "{}"),
            ("input B", "input_bytes", "{:,}"), ("shared", "shared_with", "{}"), ("plan", None, ""),
            ("stored B", "stored_bytes", "{:,}"), ("basis B", "basis_bytes", "{:,}"), ("net B", "net_saving", "{:,}"),
            ("cos>=", "cos_bound", "{:.4f}"), ("cos", "cos", "{:.4f}"), ("verdict", None, ""),
        )  # fmt: skip
        body = []
        for r in self.layers:
            row = []
            for title, attr, fmt in cols:
                if title == "plan":
                    if r.rank is None:
                        row.append("-")
                    else:
                        res = f"+res{r.residual_density:.3f}@{r.residual_bits}b" if r.residual_bits else ""
                        row.append(f"r{r.rank} {r.coef_dtype}{res}")
                elif title == "verdict":
                    row.append("wrap" if r.accepted else "refuse")
                elif title == "shared":
                    row.append(str(len(r.shared_with) + 1) if r.input_bytes else "-")
                else:
                    row.append(_cell(getattr(r, attr), fmt) if attr else "")
            body.append(row)
        head = [c[0] for c in cols]
        widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
        table = [
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
            for row in [head, *body]
        ]
        refusals = [f"  {r.name}: {r.reason}" for r in self.layers if not r.accepted]
        out = [self.summary(), *table]
        if refusals:
            out += ["refused:", *refusals]
        return "\n".join(out)

    __str__ = __repr__

    def plot(self, ax: Any = None) -> Any:
        """Bar chart per candidate layer: its saved input, and the compressed copy + basis it would cost.

        Accepted layers in one colour, refused ones hatched. Needs matplotlib; returns the axes.
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(self.layers)), 3.5))
        xs = list(range(len(self.layers)))
        share = [r.input_bytes / (len(r.shared_with) + 1) / 2**20 for r in self.layers]
        cost = [(r.stored_bytes + r.basis_bytes) / 2**20 for r in self.layers]
        colors = ["tab:green" if r.accepted else "tab:red" for r in self.layers]
        ax.bar([x - 0.2 for x in xs], share, width=0.4, color=colors, label="saved input (share), MiB")
        ax.bar([x + 0.2 for x in xs], cost, width=0.4, color="tab:gray", hatch="//", label="compressed copy + basis, MiB")
        ax.set_xticks(xs)
        ax.set_xticklabels([r.name for r in self.layers], rotation=90, fontsize=7)
        ax.set_ylabel("MiB")
        ax.set_title(
            f"SSP {100 * self.ssp:.1f}%, predicted -{100 * self.predicted_reduction:.1f}% (green: wrap, red: refuse)",
            fontsize=9,
        )
        ax.legend(fontsize=7)
        return ax


# ------------------------------------------------------------------------------------------------------------
# helpers


def _features(module: nn.Module) -> tuple[int, int]:
    adapter = adapter_for(module)
    assert adapter is not None
    return adapter.features(module)


def _config(config: Any) -> PredictConfig:
    if config is None:
        return PredictConfig()
    if isinstance(config, PredictConfig):
        cfg = config
    elif isinstance(config, numbers.Real) and not isinstance(config, bool):
        cfg = PredictConfig(ratio=float(config))
    elif isinstance(config, Mapping):
        allowed = [f.name for f in fields(PredictConfig)]
        unknown = set(config) - set(allowed)
        if unknown:
            raise ValueError(f"config: unknown keys {sorted(unknown)}; allowed: {', '.join(allowed)}")
        cfg = PredictConfig(**dict(config))
    else:
        raise TypeError(f"config: expected a PredictConfig, a dict, a ratio or None, got {type(config).__name__}")
    _checks.check_ratio(cfg.ratio)
    if not isinstance(cfg.plan_all, bool):
        if isinstance(cfg.plan_all, str) or not isinstance(cfg.plan_all, Iterable):
            raise TypeError(f"config.plan_all: expected a bool or an iterable of layer names, got {type(cfg.plan_all).__name__}")
        names = tuple(cfg.plan_all)
        if not all(isinstance(n, str) for n in names):
            raise TypeError("config.plan_all: expected layer names (str)")
        cfg = replace(cfg, plan_all=names)
    _checks.check_bool("config.train", cfg.train)
    _checks.check_bool("config.lean", cfg.lean)
    budget = _checks.check_compute_budget(cfg.compute_budget, " (config.compute_budget)")
    return replace(cfg, compute_budget=DEFAULT_COMPUTE_BUDGET if budget is None else budget)


def _check_devices(model: nn.Module, batch: Any) -> None:
    """A meta model is planned with meta batches, a real model with real ones (never a silent mix)."""
    no_data = {not has_data(p) for p in [*model.parameters(), *model.buffers()]}
    if len(no_data) > 1:
        raise ValueError("model: some parameters or buffers are on the meta device (or fake) and some are not")
    model_dev = "meta" if True in no_data else next((str(p.device) for p in model.parameters()), "cpu")
    for t in _batch_tensors(batch):
        if has_data(t) == (model_dev == "meta"):
            where = "meta (or fake)" if not has_data(t) else str(t.device)
            raise ValueError(
                f"batch: a tensor of shape {tuple(t.shape)} is on {where} but the model is on {model_dev}; plan "
                "a model built on the meta device with meta batches (torch.empty(..., device='meta')), a real "
                "model with real ones"
            )


def _optimizer_state(model: nn.Module, optimizer: Any) -> tuple[int, str]:
    """Bytes of the optimizer state and the name of what was assumed."""
    trainable = {id(p): p for p in model.parameters() if p.requires_grad}
    if optimizer is None:
        kind, factor, params = "AdamW (default; pass optimizer= to change)", 2, list(trainable.values())
        return _state_bytes(params, factor), kind
    if isinstance(optimizer, str):
        name = optimizer.lower().replace("-", "").replace("_", "").replace("+", "")
        table = {"adam": ("Adam", 2), "adamw": ("AdamW", 2), "sgd": ("SGD", 0), "sgdmomentum": ("SGD with momentum", 1),
                 "none": ("none (no optimizer state)", 0)}  # fmt: skip
        if name not in table:
            raise ValueError(f"optimizer: unknown name {optimizer!r}; use 'adam', 'adamw', 'sgd', 'sgd-momentum' or 'none'")
        kind, factor = table[name]
        return _state_bytes(list(trainable.values()), factor), kind
    if isinstance(optimizer, torch.optim.Optimizer):
        total = 0
        cls = type(optimizer).__name__
        kind = cls
        for group in optimizer.param_groups:
            params = [p for p in group["params"] if p.requires_grad]
            if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
                factor = 3 if group.get("amsgrad", False) else 2
            elif isinstance(optimizer, torch.optim.SGD):
                factor = 1 if group.get("momentum", 0) else 0
                kind = "SGD with momentum" if factor else "SGD"
            else:
                factor = 2
                kind = f"{cls} (unknown: assumed 2 state tensors per parameter, like Adam)"
            total += _state_bytes(params, factor)
        if "unknown" in kind:
            warn(
                f"optimizer: the predictor does not know {cls}; it assumed 2 state tensors of each parameter's size "
                "(like Adam/AdamW). Pass optimizer='sgd', 'sgd-momentum', 'adam' or 'adamw' to override",
                UserWarning,
            )
        return total, kind
    raise TypeError(
        f"optimizer: expected a torch.optim.Optimizer, a name ('adamw', 'adam', 'sgd', 'sgd-momentum', 'none') "
        f"or None, got {type(optimizer).__name__}"
    )


def _state_bytes(params: Sequence[Tensor], factor: int) -> int:
    if factor == 0:
        return 0
    # per parameter: `factor` tensors like it, plus Adam's 0-d float32 step counter
    step = 4 if factor >= 2 else 0
    return sum(factor * p.numel() * p.element_size() + step for p in params)


def _batch_tensors(batch: Any) -> list[Tensor]:
    """The tensors of a batch (a tensor, or nested tuples/lists/dicts of them)."""
    if isinstance(batch, Tensor):
        return [batch]
    if isinstance(batch, Mapping):
        return [t for v in batch.values() for t in _batch_tensors(v)]
    if isinstance(batch, (tuple, list)):
        return [t for v in batch for t in _batch_tensors(v)]
    return []


def _call(model: nn.Module, batch: Any) -> Any:
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def _loss_of(output: Any, loss_fn: Callable[[Any], Tensor] | None) -> Tensor:
    if loss_fn is not None:
        loss = loss_fn(output)
    elif isinstance(output, Tensor):
        loss = output if output.dim() == 0 else output.sum()  # sum saves nothing: memory-neutral stand-in
    elif isinstance(getattr(output, "loss", None), Tensor):
        loss = output.loss
    elif isinstance(output, Mapping) and isinstance(output.get("loss"), Tensor):
        loss = output["loss"]
    elif isinstance(output, (tuple, list)) and any(isinstance(o, Tensor) and o.dim() == 0 for o in output):
        loss = next(o for o in output if isinstance(o, Tensor) and o.dim() == 0)
    elif isinstance(output, (tuple, list)) and output and isinstance(output[0], Tensor):
        loss = output[0].sum()
    else:
        raise TypeError(
            f"loss_fn: the model returned {type(output).__name__}; pass loss_fn=callable(output) -> scalar tensor"
        )
    if not isinstance(loss, Tensor) or loss.numel() != 1:
        raise ValueError(f"loss_fn: expected a scalar tensor, got {type(loss).__name__} "
                         f"{tuple(loss.shape) if isinstance(loss, Tensor) else ''}")  # fmt: skip
    if not loss.requires_grad or loss.grad_fn is None:
        raise ValueError("loss_fn: the loss does not require grad (no trainable parameter reaches it)")
    return loss.reshape(())


def _linear_node(out: Any) -> Any:
    """The Addmm/Mm node of a Linear's output (through view/add nodes)."""
    node = out.grad_fn if isinstance(out, Tensor) else None
    for _ in range(4):
        if node is None:
            return None
        name = type(node).__name__
        if name in ("AddmmBackward0", "MmBackward0"):
            return node
        if name not in _PASS_THROUGH:
            return None
        nxt = [f for f, _ in node.next_functions if f is not None and type(f).__name__ != "AccumulateGrad"]
        node = nxt[0] if nxt else None
    return None


def _walk(loss: Tensor, skip: set[_Key], skipped: list[tuple[Any, str]] | None = None) -> list[tuple[Any, str, Tensor]]:
    """Every (node, attribute, tensor) saved in the graph of ``loss`` (storages in ``skip`` left out and
    listed in ``skipped``)."""
    out: list[tuple[Any, str, Tensor]] = []
    seen: set[int] = set()
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names = [a for a in dir(node) if a.startswith("_saved_")]
        values: list[tuple[str, Any]] = []
        for a in names:
            try:
                values.append((a, getattr(node, a)))
            except Exception:  # noqa: BLE001, S112 - freed or unreadable: nothing alive to count
                continue
        if not names and hasattr(node, "saved_tensors"):  # Python autograd.Function / custom ops
            try:
                values.append(("saved_tensors", tuple(node.saved_tensors)))
            except Exception:  # noqa: BLE001, S110 - freed: nothing alive to count
                pass
        for a, v in values:
            for t in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(t, Tensor) and t.untyped_storage().nbytes() > 0 and not _is_wrapped_number(t):
                    if storage_key(t) not in skip:
                        out.append((node, a, t))
                    elif skipped is not None:
                        skipped.append((node, a))
        stack.extend(f for f, _ in node.next_functions)
    return out


_PROBE = {False: torch.int8, True: torch.float16}


def _is_wrapped_number(t: Tensor) -> bool:
    """A Python scalar autograd wrapped into a 0-d CPU tensor (``x * 0.5`` saves one): never passed to the
    saved-tensor hooks, so not counted by the meter either. Wrapped numbers lose type promotion even against
    a 0-d tensor of a narrower type, which is how they are told apart."""
    if t.dim() != 0 or t.device.type != "cpu" or t.dtype not in (torch.float64, torch.int64):
        return False
    probe = _PROBE[t.dtype.is_floating_point]
    return torch.result_type(torch.zeros((), dtype=probe), t) == probe


def _candidate_costs(d: int, n: int, ratio: float, itemsize: int) -> int | None:
    """Lower bound of one compressed copy + basis over the layouts the planner considers (None: unknown)."""
    try:
        from thrifty.compress._codec import _PLAN_BLOCK, _PLAN_RESIDUALS, _rank_for
    except ImportError:
        return None
    budget = d * itemsize / ratio
    best: int | None = None
    block = min(_PLAN_BLOCK, d)
    for coef in ("int8", "bf16"):
        for k, bits in _PLAN_RESIDUALS:
            probe = LayerConfig(rank=1, coef=coef, block=block, k=min(k, block), bits=bits)
            r = min(_rank_for(budget, d, coef, probe.residual_bytes_per_row(d)), d - 1)
            if r < 1:
                continue
            cost = n * LayerConfig(rank=r, coef=coef, block=block, k=min(k, block), bits=bits).bytes_per_row(d) + d * r * 4
            best = cost if best is None else min(best, cost)
    return best


def _overhead_flops(n: int, d: int, m: int, cfg: LayerConfig) -> int:
    r = cfg.rank
    fwd = 2 * n * d * r + (2 * n * d * r if cfg.refresh_every else 0) + (2 * n * d * r if cfg.k else 0)
    refresh_qr = 2 * d * r * r if cfg.refresh_every else 0
    bwd = 2 * n * m * r + 2 * m * r * d - 2 * n * m * d  # factors instead of the dense Gᵀ·X
    return fwd + refresh_qr + bwd


# ------------------------------------------------------------------------------------------------------------
# predict


def predict(
    model: nn.Module,
    batch: Any,
    loss_fn: Callable[[Any], Tensor] | None = None,
    optimizer: Any = None,
    config: PredictConfig | Mapping[str, Any] | float | None = None,
) -> SSPReport:
    """Predict, from one dry-run batch, how much STAC-R will lower the peak memory of a training step.

    Runs one forward and backward of ``model`` on ``batch`` (no optimizer step; the parameters' ``.grad``,
    buffers, RNG states and the modules' train/eval modes are restored), walks the saved tensors of the
    autograd graph by storage, and plans every replaceable Linear input with the codec STAC-R uses.

    Parameters
    ----------
    model : torch.nn.Module
        The uncompressed model (no :class:`CompressedLinear` inside). Not modified.
    batch : Tensor, tuple/list (``model(*batch)``) or dict (``model(**batch)``)
        One training batch, on the model's device. A model built on the meta device (or under
        ``FakeTensorMode``) takes meta (fake) batches: the plan of a model too large for this machine, byte-exact
        in P, its terms, A_C⁺ and the rows; layouts from the byte budget (``report.layouts``), no bridge.
    loss_fn : callable(output) -> scalar Tensor, optional
        Default: a scalar output itself, ``output.loss``, ``output["loss"]``, the first 0-d tensor of a
        tuple output (``(logits, loss)``), or else ``output.sum()`` (saves nothing, so memory-neutral).
    optimizer : torch.optim.Optimizer, str or None
        For the optimizer-state term of the peak: an optimizer instance (Adam/AdamW: 2 state tensors per
        parameter, 3 with amsgrad; SGD: 1 with momentum, else 0; other classes: warns and assumes 2),
        a name (``"adamw"``, ``"adam"``, ``"sgd"``, ``"sgd-momentum"``, ``"none"``), or None (AdamW assumed).
    config : PredictConfig, dict, float (the ratio) or None
        See :class:`PredictConfig`.

    Returns
    -------
    SSPReport

    Raises
    ------
    TypeError
        ``model`` is not an ``nn.Module`` or already holds compressed layers; bad ``optimizer``/``config``
        types; a model output the default loss cannot use.
    ValueError
        The model has no Linear-like layer; a meta (or fake) model with a real batch, or the reverse; the
        forward fails on ``batch`` (wrong shape, dtype or device: the original error is chained); the loss is
        not a scalar that requires grad.
    RuntimeError
        Called inside ``torch.inference_mode()`` (the dry run needs autograd); a meta run that saves nothing
        for backward (never a silent zero). Inside ``torch.no_grad()`` the dry run enables gradients itself
        and warns.

    Examples
    --------
    >>> import torch
    >>> from thrifty.compress import predict
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    >>> x = torch.randn(2048, 64) @ torch.randn(64, 64)
    >>> report = predict(model, x, optimizer="sgd")
    >>> 0 <= report.predicted_reduction <= report.ssp <= 1
    True
    >>> report["2"].accepted, report["2"].reason   # its input (the GELU output) is saved by it alone
    (True, 'net saving')
    >>> report["0"].reason                          # the first layer's input is the batch itself
    'its input is the batch itself, which the caller keeps alive: compressing it frees nothing'
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    for name, mod in model.named_modules():
        if isinstance(mod, CompressedLinear):
            raise TypeError(
                f"model: layer {name or '(model)'!r} is already a CompressedLinear; predict on the uncompressed "
                "model (thrifty.compress.unwrap)"
            )
    if not any(adapter_for(m) is not None for m in model.modules()):
        raise ValueError("model: has no torch.nn.Linear layer; STAC-R compresses the inputs of Linear layers only")
    if torch.is_inference_mode_enabled():
        raise RuntimeError("predict: called inside torch.inference_mode(); the dry run needs autograd (call it outside)")
    cfg = _config(config)
    _check_devices(model, batch)
    candidates = select_layers(model, cfg.layers)
    opt_bytes, opt_kind = _optimizer_state(model, optimizer)
    if not torch.is_grad_enabled():
        warn(
            "predict: called inside torch.no_grad(); the dry run enables gradients itself (training needs them)",
            UserWarning,
        )
    with torch.enable_grad():
        return _predict(model, batch, loss_fn, cfg, candidates, opt_bytes, opt_kind)


@dataclass
class _Fixed:
    """The peak's fixed terms and the storages the walk leaves out (parameters, buffers, the batch)."""

    param_bytes: int
    batch_bytes: int
    grad_bytes: int
    skip: set[_Key]


@dataclass
class _Dry:
    """What the forward hooks of the dry run record per Linear-like layer."""

    node_of: dict[int, str] = field(default_factory=dict)  # id(Addmm/Mm node) -> layer name
    shapes: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)  # name -> [(n, d, m)] per call
    bridge_in: dict[str, list[tuple[Tensor, Tensor]]] = field(default_factory=dict)  # name -> [(out, x)] per call


@dataclass
class _Storages:
    """The saved tensors grouped by storage: bytes, the Linear inputs and the other saves of each."""

    nbytes: dict[int, int] = field(default_factory=dict)
    consumers: dict[int, list[str]] = field(default_factory=dict)  # storage -> layers saving it as their input
    others: dict[int, list[str]] = field(default_factory=dict)  # storage -> other saves ("Node.attribute")
    first_kind: dict[int, str] = field(default_factory=dict)
    x_of: dict[str, list[Tensor]] = field(default_factory=dict)  # layer -> its saved input(s)
    storages_of: dict[str, list[int]] = field(default_factory=dict)  # layer -> storages of its input


def _predict(
    model: nn.Module,
    batch: Any,
    loss_fn: Callable[[Any], Tensor] | None,
    cfg: PredictConfig,
    candidates: list[str],
    opt_bytes: int,
    opt_kind: str,
) -> SSPReport:
    """The predictor's steps: fixed terms, dry forward, storages, surface, plans, backward with the bridge,
    net savings and the per-layer rows."""
    fixed = _fixed_terms(model, batch)
    modules = dict(model.named_modules())
    features = {n: _features(m) for n, m in modules.items() if adapter_for(m) is not None}
    meta = any(not has_data(p) for p in model.parameters())
    probe = LeanProbe(model, cfg.lean, with_loss=loss_fn is None)
    all_candidates, candidates = candidates, [n for n in candidates if n not in probe.replaced_layers]
    with _restoring(model, train=cfg.train):
        dry = _Dry()
        loss = _dry_forward(model, batch, loss_fn, dry, set(candidates), features, probe)
        skipped: list[tuple[Any, str]] = []
        saved = _walk(loss, fixed.skip, skipped)
        lean = probe.rows(loss, saved, _linear_node(probe.head_out))
        st = _group_storages(saved, dry.node_of)
        del saved
        if meta and not st.nbytes:
            raise RuntimeError("predict: the meta-device dry run saved nothing for backward; there is nothing to plan")
        on_batch = {dry.node_of[id(node)] for node, attr in skipped
                    if (type(node).__name__, attr) in _LINEAR_INPUT and id(node) in dry.node_of}  # fmt: skip
        verdict, kept, surface = _surface(st, set(candidates))
        _refuse_certain_losses(st, verdict, cfg, dry.shapes, features)
        codecs = _plan_layers(st, verdict, cfg, candidates, features)
        bridge = _backward_with_bridge(loss, dry, codecs)
        del loss
    cost_of = {n: (sum(c[0] for c in dry.shapes.get(n, [])) * codec.config.bytes_per_row(codec.d), codec.state_bytes)
               for n, codec in codecs.items() if codec.config is not None}  # fmt: skip
    _net_verdicts(st, verdict, cost_of)
    rows = [_row(n, features[n], st, verdict, dry.shapes.get(n, []), on_batch, codecs.get(n), cost_of, bridge)
            if n not in probe.replaced_layers else _replaced_row(n, features[n], dry.shapes.get(n, []))
            for n in all_candidates]  # fmt: skip
    largest_linear = max(((n_ * m + n_ * d) * 4 for calls in dry.shapes.values() for n_, d, m in calls), default=0)
    return SSPReport(
        layers=tuple(rows), config=cfg, optimizer=opt_kind, param_bytes=fixed.param_bytes,
        batch_bytes=fixed.batch_bytes, grad_bytes=fixed.grad_bytes, optimizer_bytes=opt_bytes,
        saved_bytes=sum(st.nbytes.values()), transient_bytes=max(2 * max(st.nbytes.values(), default=0), largest_linear),
        surface_bytes=surface + sum(r.freed_bytes for r in lean),
        saved_by=_saved_by(st), base_flops=sum(6 * n_ * d * m for calls in dry.shapes.values()
                                                                      for n_, d, m in calls),
        layouts="byte budget (meta/fake run: no activations to plan on)" if meta else "planned on the batch",
        lean=tuple(lean),
        _codecs=codecs, _storage_of={n: tuple(s) for n, s in st.storages_of.items()},
        _storage_bytes=dict(st.nbytes), _kept=frozenset(kept),
    )  # fmt: skip


def _fixed_terms(model: nn.Module, batch: Any) -> _Fixed:
    params = list(model.parameters())
    tensors = [*params, *model.buffers()]
    skip = {storage_key(t) for t in tensors if t.untyped_storage().nbytes() > 0}
    param_bytes = sum({storage_key(t): t.untyped_storage().nbytes() for t in tensors}.values())
    # the batch stays alive in the caller: part of the peak, never freed by compressing what saves it
    batch_keys = {storage_key(t): t.untyped_storage().nbytes() for t in _batch_tensors(batch)}
    batch_bytes = sum(n for k, n in batch_keys.items() if k not in skip)
    grad_bytes = sum({storage_key(p): p.untyped_storage().nbytes() for p in params if p.requires_grad}.values())
    return _Fixed(param_bytes, batch_bytes, grad_bytes, skip | set(batch_keys))


@contextmanager
def _restoring(model: nn.Module, *, train: bool) -> Iterator[None]:
    """Run the dry run in train mode (if asked) and restore what it touches: ``.grad``, buffers, modes, RNG."""
    params = list(model.parameters())
    buffers = list(model.buffers())
    grads = [p.grad for p in params]
    modes = {m: m.training for m in model.modules()}
    saved_buffers = [b.detach().clone() for b in buffers]
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]
    try:
        if train:
            model.train()
        for p in params:
            p.grad = None
        yield
    finally:
        for p, g in zip(params, grads):
            p.grad = g
        with torch.no_grad():
            for b, v in zip(buffers, saved_buffers):
                b.copy_(v)
        for m, mode in modes.items():
            m.training = mode
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)


def _dry_forward(
    model: nn.Module, batch: Any, loss_fn: Callable[[Any], Tensor] | None, dry: _Dry, candidates: set[str],
    features: Mapping[str, tuple[int, int]], probe: LeanProbe,
) -> Tensor:  # fmt: skip
    """The forward and the loss, with hooks recording each Linear-like layer's node, shapes and output (and
    the lean pieces' nodes)."""

    def fwd_hook(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple[Any, ...], out: Any) -> None:
            node = _linear_node(out)
            if node is not None:
                dry.node_of[id(node)] = name
            if isinstance(out, Tensor) and args and isinstance(args[0], Tensor):
                x = args[0]
                dry.shapes.setdefault(name, []).append((x.numel() // max(1, x.shape[-1]), x.shape[-1], out.shape[-1]))
                if out.requires_grad and name in candidates:
                    dry.bridge_in.setdefault(name, []).append((out, x))

        return hook

    modules = dict(model.named_modules())
    handles = [modules[n].register_forward_hook(fwd_hook(n)) for n in features] + probe.attach()
    try:
        output = _call(model, batch)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError) as e:
        raise ValueError(f"batch: the model's forward failed on it ({type(e).__name__}: {e})") from e
    finally:
        for h in handles:
            h.remove()
    return _loss_of(output, loss_fn)


def _group_storages(saved: list[tuple[Any, str, Tensor]], node_of: Mapping[int, str]) -> _Storages:
    """Group the saves by storage (views and repeated saves count once)."""
    st = _Storages()
    sid_of: dict[_Key, int] = {}
    for node, attr, t in saved:
        sid = sid_of.setdefault(storage_key(t), len(sid_of))
        st.nbytes[sid] = int(t.untyped_storage().nbytes())
        lin = node_of.get(id(node)) if (type(node).__name__, attr) in _LINEAR_INPUT else None
        if lin is not None:
            if lin not in st.consumers.setdefault(sid, []):
                st.consumers[sid].append(lin)
                st.x_of.setdefault(lin, []).append(t.detach())
                st.storages_of.setdefault(lin, []).append(sid)
            st.first_kind.setdefault(sid, "Linear input")
        else:
            label = f"{type(node).__name__}.{attr.removeprefix('_saved_')}"
            if label not in st.others.setdefault(sid, []):
                st.others[sid].append(label)
            st.first_kind.setdefault(sid, type(node).__name__)
    return st


def _saved_by(st: _Storages) -> dict[str, int]:
    out: dict[str, int] = {}
    for sid, kind in st.first_kind.items():
        out[kind] = out.get(kind, 0) + st.nbytes[sid]
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _surface(st: _Storages, cand: set[str]) -> tuple[dict[int, tuple[bool, str]], set[int], int]:
    """A_C⁺ (storages whose every save is a candidate's input), and the storages another op keeps alive."""
    surface = 0
    verdict: dict[int, tuple[bool, str]] = {}
    kept: set[int] = set()
    for sid, names in st.consumers.items():
        blockers = [n for n in names if n not in cand]
        co = st.others.get(sid, [])
        if co or blockers:
            kept.add(sid)
            who = ", ".join(co + [f"Linear {b!r} (not selected)" for b in blockers])
            verdict[sid] = (False, f"kept alive by {who}: wrapping adds a compressed copy and frees nothing")
        else:
            surface += st.nbytes[sid]
    return verdict, kept, surface


def _refuse_certain_losses(
    st: _Storages, verdict: dict[int, tuple[bool, str]], cfg: PredictConfig,
    shapes: Mapping[str, list[tuple[int, int, int]]], features: Mapping[str, tuple[int, int]],
) -> None:  # fmt: skip
    """Storages that lose memory whatever the layout are refused before paying for planning them."""
    for sid, names in st.consumers.items():
        if sid in verdict:
            continue
        if cfg.plan_all is not True:
            lows = [_candidate_costs(features[n][0], sum(c[0] for c in shapes.get(n, [])), cfg.ratio,
                                     st.x_of[n][0].element_size()) for n in names]  # fmt: skip
            known = [lo for lo in lows if lo is not None]
            if len(known) == len(lows) and st.nbytes[sid] - sum(known) <= 0:
                verdict[sid] = (False, _loss_reason(st.nbytes[sid], sum(known), len(names), lower=True))
                continue
        verdict[sid] = (True, "")


def _plan_layers(
    st: _Storages, verdict: dict[int, tuple[bool, str]], cfg: PredictConfig, candidates: list[str],
    features: Mapping[str, tuple[int, int]],
) -> dict[str, LayerCodec]:  # fmt: skip
    """The codec stac_r would build for each plannable layer, on this very batch (on meta: from the budget)."""
    codecs: dict[str, LayerCodec] = {}
    for i, n in enumerate(candidates):
        if n not in st.x_of:
            continue
        forced = cfg.plan_all is True or (not isinstance(cfg.plan_all, bool) and n in cfg.plan_all)
        if not (forced or all(verdict[s][0] for s in st.storages_of[n])):
            continue
        d_in, d_out = features[n]
        # the compute cap CompressedLinear applies with the same compute_budget (same plan, same bytes)
        cap = compute_cap(cfg.compute_budget, d_out)
        codec = LayerCodec(d_in, None, cfg.ratio, seed=0, layer_index=i, overrides=cap)
        x = st.x_of[n][0]
        try:
            if not has_data(x):
                codec.config = budget_layout(d_in, cfg.ratio, itemsize=x.element_size(), overrides=cap)
                codec.u = torch.empty((d_in, codec.config.rank), dtype=torch.float32, device="meta")
            else:
                with torch.no_grad():
                    codec.basis_for(x.reshape(-1, d_in))
        except ValueError as e:
            for s in st.storages_of[n]:
                verdict[s] = (False, f"cannot be planned: {e}")
            continue
        codecs[n] = codec
    st.x_of.clear()
    return codecs


def _backward_with_bridge(loss: Tensor, dry: _Dry, codecs: Mapping[str, LayerCodec]) -> dict[str, tuple[float, float, float, int]]:
    """The dry run's backward, measuring each planned layer's gradient bridge as its output gradient arrives."""
    bridge: dict[str, tuple[float, float, float, int]] = {}  # name -> (rel_error, eps, cos, stored bytes)
    hooks = []
    for n, outs in dry.bridge_in.items():
        if n not in codecs or not has_data(outs[0][0]):
            continue
        for j, (out, x) in enumerate(outs):
            hooks.append(out.register_hook(_bridge_hook(n, j, x, codecs[n], bridge)))  # type: ignore[no-untyped-call]
    dry.bridge_in.clear()
    try:
        loss.backward()  # type: ignore[no-untyped-call]
    finally:
        for h in hooks:
            h.remove()
    return bridge


def _net_verdicts(st: _Storages, verdict: dict[int, tuple[bool, str]], cost_of: Mapping[str, tuple[int, int]]) -> None:
    """A storage is accepted when freeing it saves more than its consumers' compressed copies and bases."""
    for sid, names in st.consumers.items():
        if not verdict[sid][0] or not all(n in cost_of for n in names):
            continue  # refused already (a planning failure included)
        cost = sum(sum(cost_of[n]) for n in names)
        if st.nbytes[sid] - cost <= 0:
            verdict[sid] = (False, _loss_reason(st.nbytes[sid], cost, len(names), lower=False))
        else:
            verdict[sid] = (True, "net saving")


def _row(
    n: str, dims: tuple[int, int], st: _Storages, verdict: Mapping[int, tuple[bool, str]],
    calls: list[tuple[int, int, int]], on_batch: set[str], codec: LayerCodec | None,
    cost_of: Mapping[str, tuple[int, int]], bridge: Mapping[str, tuple[float, float, float, int]],
) -> LayerPrediction:  # fmt: skip
    """One candidate's row of the report."""
    d_in, d_out = dims
    sids = st.storages_of.get(n, [])
    rows = sum(c[0] for c in calls)
    if not sids:
        if n in on_batch:
            reason = "its input is the batch itself, which the caller keeps alive: compressing it frees nothing"
        elif calls:
            reason = "its input is not saved (weight frozen, or not in the graph of the loss)"
        else:
            reason = "not called in the dry run"
        return LayerPrediction(n, d_in, d_out, rows, 0, (), (), False, reason)
    accepted = all(verdict[s][0] for s in sids)
    reason = "net saving" if accepted else next(verdict[s][1] for s in sids if not verdict[s][0])
    shared = tuple(sorted({m for s in sids for m in st.consumers[s] if m != n}))
    co_names = tuple(sorted({o for s in sids for o in st.others.get(s, [])}))
    input_bytes = sum(st.nbytes[s] for s in sids)
    share = sum(st.nbytes[s] / len(st.consumers[s]) for s in sids)
    kw: dict[str, Any] = {}
    if codec is not None and codec.config is not None:
        c = codec.config
        stored, basis = cost_of[n]
        rel, eps, cos = bridge.get(n, (math.nan, math.nan, math.nan, 0))[:3]
        kw = {
            "rank": c.rank, "coef_dtype": c.coef,
            "residual_density": c.k / min(c.block, d_in) if c.k else 0.0,
            "residual_bits": c.bits if c.k else None, "stored_bytes": stored, "basis_bytes": basis,
            "net_saving": round(share) - stored - basis, "rel_error": rel, "eps": eps,
            "cos_bound": math.sqrt(max(0.0, 1.0 - eps * eps)) if not math.isnan(eps) else math.nan, "cos": cos,
            "overhead_flops": sum(_overhead_flops(r_, d_, m_, c) for r_, d_, m_ in calls),
        }  # fmt: skip
    return LayerPrediction(n, d_in, d_out, rows, input_bytes, shared, co_names, accepted, reason, **kw)


def _replaced_row(n: str, dims: tuple[int, int], calls: list[tuple[int, int, int]]) -> LayerPrediction:
    """The head when the lean loss takes it over (config.lean): not wrapped, its matmul is the chunked loss's."""
    reason = "replaced by the chunked loss (config.lean: lean_loss keeps its input exact); not wrapped"
    return LayerPrediction(n, dims[0], dims[1], sum(c[0] for c in calls), 0, (), (), False, reason)


def _loss_reason(freed: int, cost: int, k: int, *, lower: bool) -> str:
    copies = f"{k} compressed copies + {k} bases" if k > 1 else "a compressed copy + its basis"
    at_least = "at least " if lower else ""
    return (
        f"net loss: freeing {_fmt_bytes(freed)} costs {at_least}{_fmt_bytes(cost)} ({copies}) on this batch "
        "(more rows per batch amortise the basis)"
    )


def _bridge_hook(
    name: str, call: int, x: Tensor, codec: LayerCodec, out: dict[str, tuple[float, float, float, int]]
) -> Callable[[Tensor], None]:
    """In backward: ε from the reconstruction error, and the cosine of the kernels' weight gradient."""

    def hook(grad: Tensor) -> None:
        if call != 0 or name in out:
            return
        with torch.no_grad(), torch.autocast(grad.device.type, enabled=False):
            cfg = codec.config
            u = codec.u
            assert cfg is not None and u is not None
            d = codec.d
            x2d = x.detach().reshape(-1, d)
            g = grad.detach().reshape(-1, grad.shape[-1]).to(torch.float32)
            packed = _kernels.compress(x2d, u, coef=cfg.coef, block=cfg.block, k=cfg.k, bits=cfg.bits)
            xhat = _kernels.decompress(u, *packed, d=d, block=cfg.block, bits=cfg.bits)
            x32 = x2d.to(torch.float32)
            e = x32 - xhat
            exact = (g.t() @ x32).to(torch.float64)
            delta = (g.t() @ e).to(torch.float64)  # ĝ − g predicted from the reconstruction error
            ghat = _kernels.grad_weight(g, u, *packed, d=d, block=cfg.block, bits=cfg.bits).to(torch.float64)
            gn = float(torch.linalg.vector_norm(exact))
            hn = float(torch.linalg.vector_norm(ghat))
            xn = float(torch.linalg.vector_norm(x32))
            rel = float(torch.linalg.vector_norm(e)) / xn if xn > 0 else 0.0
            eps = float(torch.linalg.vector_norm(delta)) / gn if gn > 0 else 0.0
            cos = float((ghat * exact).sum()) / (gn * hn) if gn > 0 and hn > 0 else (1.0 if gn == 0 else 0.0)
            out[name] = (rel, eps, cos, sum(int(t.numel()) * t.element_size() for t in packed))

    return hook
