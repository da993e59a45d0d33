"""The lean pieces in the Saved-Surface Predictor: what :func:`lean_activations` and :func:`lean_loss` free.

Both are exact (the same function, the same gradients to float rounding: their fidelity model is cosine 1), so
their saving is bytes alone, read from the dry run's autograd graph of the model as shipped:

- a composite tanh-GELU module: the storages saved only by the nodes its forward created, less its input
  (``nn.GELU(approximate="tanh")`` saves the input once);
- the language-model loss: the storages saved only by the nodes between the loss and the head's matmul (the
  head's matmul included: the fp32 log-softmax over the vocabulary, the targets, under autocast the cast copies
  of the weight and the hidden states), less what :func:`linear_cross_entropy` saves instead (the hidden
  states in the head's compute dtype, the targets, one float per row).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from thrifty.compress._lean import _is_tanh_gelu
from thrifty.compress._loss import _CAUSAL_LMS, has_lean_loss
from thrifty.compress._meter import storage_key

__all__ = ["LeanPrediction", "LeanProbe"]

_Key = tuple[str, int, int]
_GELU_FIDELITY = "exact: nn.GELU(approximate='tanh') is the same function, backward from the saved input"
_LOSS_FIDELITY = "exact: the same loss and gradients, logits recomputed per chunk in backward"


@dataclass(frozen=True)
class LeanPrediction:
    """One piece the library replaces by itself, exactly (rows of :attr:`SSPReport.lean`).

    Attributes
    ----------
    name : str
        The module (a tanh-GELU) or ``"loss"`` (with the head's name in ``kind``).
    kind : str
        ``"tanh-GELU -> one op (lean_activations)"`` or ``"linear cross-entropy over <head> (lean_loss)"``.
    saved_bytes : int
        Bytes the piece saves for backward as shipped (storages no other op saves).
    freed_bytes : int
        Bytes it takes off the peak when replaced (``saved_bytes`` less what the replacement saves).
    fidelity : str
        The fidelity model: both pieces are exact (weight-gradient cosine 1 to float rounding).
    """

    name: str
    kind: str
    saved_bytes: int
    freed_bytes: int
    fidelity: str


@dataclass
class LeanProbe:
    """Forward hooks of the dry run that find the lean pieces, then their bytes from the saved tensors."""

    model: nn.Module
    enabled: bool
    with_loss: bool = True  # the default loss (a custom loss_fn may read more than the logits)
    gelus: dict[str, tuple[Any, Any, _Key]] = field(default_factory=dict)  # name -> (out node, input node, key)
    head_out: Tensor | None = None
    head_name: str | None = None

    def __post_init__(self) -> None:
        if self.enabled and self.with_loss and _loss_applies(self.model):
            head = self.model.get_output_embeddings()  # type: ignore[operator]
            self.head_name = next(n for n, m in self.model.named_modules() if m is head)

    @property
    def replaced_layers(self) -> set[str]:
        """Candidate Linears the lean pieces take over (the head, whose matmul the chunked loss replaces)."""
        return {self.head_name} if self.head_name is not None else set()

    def attach(self) -> list[RemovableHandle]:
        if not self.enabled:
            return []
        handles = []
        for name, mod in self.model.named_modules():
            if _is_tanh_gelu(mod):
                handles.append(mod.register_forward_hook(self._gelu_hook(name)))
        if self.head_name is not None:
            head = self.model.get_submodule(self.head_name)
            handles.append(head.register_forward_hook(self._head_hook))
        return handles

    def _gelu_hook(self, name: str) -> Any:
        def hook(module: nn.Module, args: tuple[Any, ...], out: Any) -> None:
            x = args[0] if args else None
            if isinstance(out, Tensor) and isinstance(x, Tensor) and out.grad_fn is not None:
                self.gelus[name] = (out.grad_fn, x.grad_fn, storage_key(x))

        return hook

    def _head_hook(self, module: nn.Module, args: tuple[Any, ...], out: Any) -> None:
        if isinstance(out, Tensor) and out.grad_fn is not None and args and isinstance(args[0], Tensor):
            self.head_out = out
            self._head_in = args[0]

    def rows(self, loss: Tensor, saved: Iterable[tuple[Any, str, Tensor]], head_node: Any) -> list[LeanPrediction]:
        """The lean pieces' rows from the dry run's saves (``head_node``: the head's Addmm/Mm node)."""
        owners: dict[_Key, set[int]] = {}
        nbytes: dict[_Key, int] = {}
        for node, _attr, t in saved:
            k = storage_key(t)
            owners.setdefault(k, set()).add(id(node))
            nbytes[k] = int(t.untyped_storage().nbytes())

        def only_in(region: set[int]) -> dict[_Key, int]:
            return {k: nbytes[k] for k, who in owners.items() if who <= region}

        out = []
        for name, (out_fn, in_fn, x_key) in self.gelus.items():
            mine = only_in(_region(out_fn, stop=in_fn))
            freed = sum(mine.values()) - mine.get(x_key, 0)
            out.append(LeanPrediction(name, "tanh-GELU -> one op (lean_activations)", sum(mine.values()), freed,
                                      _GELU_FIDELITY))  # fmt: skip
        if self.head_out is not None and head_node is not None:
            mine = only_in(_region(loss.grad_fn, stop=None, last=head_node))
            h = self._head_in
            rows_, vocab = self.head_out.numel() // self.head_out.shape[-1], self.head_out.shape[-1]
            if self.head_out.dtype == h.dtype:  # the chunked loss saves h itself (freed only if nothing else saves it)
                keep_h = mine.get(storage_key(h), 0)
            else:  # under autocast: its own cast copy of h, as the head's matmul saved one
                keep_h = rows_ * h.shape[-1] * self.head_out.element_size()
            own = keep_h + rows_ * 8 + rows_ * 4  # h, the int64 targets, the fp32 log-sum-exp per row
            out.append(LeanPrediction("loss", f"linear cross-entropy over {self.head_name} (lean_loss), vocab {vocab}",
                                      sum(mine.values()), sum(mine.values()) - own, _LOSS_FIDELITY))  # fmt: skip
        self.head_out = None
        self.gelus.clear()
        return out


def _loss_applies(model: nn.Module) -> bool:
    names = {c.__name__ for c in type(model).__mro__}
    return bool(names & _CAUSAL_LMS) and not has_lean_loss(model) and type(model.get_output_embeddings()) is nn.Linear  # type: ignore[operator]


def _region(start: Any, *, stop: Any, last: Any = None) -> set[int]:
    """Ids of the autograd nodes reachable from ``start`` without entering ``stop`` nor going below ``last``."""
    seen: set[int] = set()
    stack = [start]
    while stack:
        node = stack.pop()
        if node is None or node is stop or id(node) in seen:
            continue
        seen.add(id(node))
        if node is not last:
            stack.extend(f for f, _ in node.next_functions)
    return seen
