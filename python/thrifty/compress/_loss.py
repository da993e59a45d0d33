"""`linear_cross_entropy` and `lean_loss`: the language-model loss without the full-vocabulary logits.

A causal LM's loss as transformers computes it, ``cross_entropy(lm_head(h).float(), shifted labels)``, saves the
fp32 log-softmax of every row over the whole vocabulary for backward (GPT-2: 50,257 x 4 bytes = 196 MiB per 1024
tokens), and the step holds the logits besides. :func:`linear_cross_entropy` computes the same loss chunk by chunk
of rows (as Liger's fused linear cross-entropy and Cut Cross-Entropy do): the forward keeps per row only the
log-sum-exp, the backward recomputes each chunk's logits and forms that chunk's ``grad_hidden`` and its share of
``grad_weight``. It saves the hidden states, the targets and one float per row: nothing approximated, the full
``(rows, vocab)`` matrix never exists.
"""

from __future__ import annotations

import copy
import functools
import numbers
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from thrifty.compress import _checks
from thrifty.compress._meter import has_data

__all__ = ["lean_loss", "linear_cross_entropy"]

M = TypeVar("M", bound=nn.Module)
_CHUNK_BYTES = 1 << 26  # each chunk's fp32 logits: at most 64 MiB of transient memory
# causal LMs whose loss is exactly ForCausalLMLoss(lm_head(base_model(...).last_hidden_state), labels)
_CAUSAL_LMS = frozenset({
    "GPT2LMHeadModel", "GPTNeoXForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM",
    "OPTForCausalLM",
})  # fmt: skip


def _compute_dtype(hidden: Tensor, weight: Tensor) -> torch.dtype:
    """The dtype the head's matmul runs in: the autocast dtype when autocast is on (as ``lm_head`` would)."""
    dev = hidden.device.type
    if torch.amp.is_autocast_available(dev) and torch.is_autocast_enabled(dev):
        return torch.get_autocast_dtype(dev)
    return torch.result_type(hidden, weight)


class _LinearCrossEntropy(torch.autograd.Function):
    """Chunked ``cross_entropy((h @ Wᵀ + b).float(), t, reduction="sum") / denom`` (``denom`` None: the number
    of targets, i.e. the mean): saves h, t and the per-row lse (the divisor is kept on ``ctx``, as autograd's
    own division would save it)."""

    @staticmethod
    def forward(
        ctx: Any, h: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor, ignore_index: int, chunk: int,
        dtype: torch.dtype, denom: Tensor | float | None,
    ) -> Tensor:  # fmt: skip
        with torch.autocast(h.device.type, enabled=False):
            hc, wc = h.to(dtype), weight.to(dtype)
            bc = bias.to(dtype) if bias is not None else None
            lse = torch.empty(h.shape[0], dtype=torch.float32, device=h.device)
            total = torch.zeros((), dtype=torch.float32, device=h.device)
            for i in range(0, h.shape[0], chunk):
                logits = _chunk_logits(hc[i : i + chunk], wc, bc)
                t = targets[i : i + chunk]
                valid = t != ignore_index
                lse[i : i + chunk] = torch.logsumexp(logits, dim=-1)
                picked = logits.gather(1, torch.where(valid, t, 0).unsqueeze(1)).squeeze(1)
                total = total + torch.where(valid, lse[i : i + chunk] - picked, 0.0).sum()
            scale = (targets != ignore_index).sum() if denom is None else denom
        ctx.save_for_backward(hc, weight, bias, targets, lse)
        ctx.meta = (ignore_index, chunk, dtype, h.dtype, scale)
        return total / scale

    @staticmethod
    def backward(ctx: Any, grad_total: Tensor) -> tuple[Tensor | None, ...]:
        hc, weight, bias, targets, lse = ctx.saved_tensors
        ignore_index, chunk, dtype, h_dtype, scale = ctx.meta
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        with torch.autocast(hc.device.type, enabled=False):
            wc = weight.to(dtype)
            bc = bias.to(dtype) if bias is not None else None
            grad_h = torch.empty(hc.shape, dtype=h_dtype, device=hc.device) if need_h else None
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=hc.device) if need_w else None
            grad_b = torch.zeros(weight.shape[0], dtype=torch.float32, device=hc.device) if need_b else None
            g = grad_total.to(torch.float32) / scale
            for i in range(0, hc.shape[0], chunk):
                hx = hc[i : i + chunk]
                t = targets[i : i + chunk]
                valid = t != ignore_index
                # d(lse - logit_t)/d logits = softmax - onehot(t), zero on ignored rows
                dlogits = torch.exp(_chunk_logits(hx, wc, bc) - lse[i : i + chunk, None])
                dlogits.scatter_add_(1, torch.where(valid, t, 0).unsqueeze(1), -valid.to(torch.float32).unsqueeze(1))
                dlogits.mul_((valid.to(torch.float32) * g).unsqueeze(1))
                dl = dlogits.to(dtype)  # the gradient reaches the matmul in its dtype, as through `.float()`
                if grad_h is not None:
                    grad_h[i : i + chunk] = (dl @ wc).to(h_dtype)
                if grad_w is not None:
                    grad_w.add_((dl.t() @ hx).to(torch.float32))  # accumulated over chunks in fp32
                if grad_b is not None:
                    grad_b.add_(dl.sum(0).to(torch.float32))
        gw = grad_w.to(weight.dtype) if grad_w is not None else None
        gb = grad_b.to(bias.dtype) if grad_b is not None and bias is not None else None
        return grad_h, gw, gb, None, None, None, None, None


def _chunk_logits(h: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    logits = h @ w.t() if b is None else torch.addmm(b, h, w.t())
    return logits.to(torch.float32)


def _check_loss_args(
    hidden: object, weight: object, labels: object, bias: object, ignore_index: object, reduction: object,
    chunk_rows: object,
) -> None:  # fmt: skip
    if not isinstance(hidden, Tensor) or not hidden.is_floating_point() or hidden.dim() < 2:
        raise TypeError(f"hidden: expected a floating tensor (..., d), got {_describe(hidden)}")
    if not isinstance(weight, Tensor) or not weight.is_floating_point() or weight.dim() != 2:
        raise TypeError(f"weight: expected a floating 2-D tensor (vocab, d), got {_describe(weight)}")
    if weight.shape[1] != hidden.shape[-1]:
        raise ValueError(f"weight: shape {tuple(weight.shape)} does not match hidden's width {hidden.shape[-1]}")
    if bias is not None and (not isinstance(bias, Tensor) or tuple(bias.shape) != (weight.shape[0],)):
        raise TypeError(f"bias: expected None or a tensor of shape ({weight.shape[0]},), got {_describe(bias)}")
    if not isinstance(labels, Tensor) or labels.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"labels: expected an int64 (or int32) tensor, got {_describe(labels)}")
    if tuple(labels.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(f"labels: shape {tuple(labels.shape)} differs from hidden's leading shape "
                         f"{tuple(hidden.shape[:-1])}")  # fmt: skip
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"ignore_index: expected an int, got {type(ignore_index).__name__}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction: expected 'mean' or 'sum', got {reduction!r}")
    if chunk_rows is not None and (isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1):
        raise ValueError(f"chunk_rows: expected None or a positive int, got {chunk_rows!r}")


def _describe(x: object) -> str:
    if isinstance(x, Tensor):
        return f"{x.dtype} tensor of shape {tuple(x.shape)}"
    return type(x).__name__


def linear_cross_entropy(
    hidden: Tensor,
    weight: Tensor,
    labels: Tensor,
    bias: Tensor | None = None,
    *,
    shift: bool = True,
    ignore_index: int = -100,
    reduction: str = "mean",
    num_items_in_batch: Tensor | int | None = None,
    chunk_rows: int | None = None,
) -> Tensor:
    """The cross-entropy of ``hidden @ weight.T + bias`` against ``labels``, never forming the full logits.

    Equal to ``torch.nn.functional.cross_entropy((hidden @ weight.T + bias).float().view(-1, vocab), targets,
    ignore_index=ignore_index, reduction=reduction)`` (transformers' causal-LM loss when ``shift=True``), in
    value and in every gradient (``hidden``, ``weight``, ``bias``) to float rounding, fp32 or under autocast
    (the head's matmul then runs in the autocast dtype, as ``lm_head`` would). Rows are processed in chunks:
    the forward keeps one log-sum-exp per row; the backward recomputes each chunk's logits. Saved for backward:
    ``hidden`` (a view of it: the same storage), the targets and one float per row, instead of the
    ``(rows, vocab)`` fp32 log-softmax. A weight shared with an embedding (tied) gets both gradients.

    Parameters
    ----------
    hidden : Tensor (..., d), floating
        The last hidden states (the head's input).
    weight : Tensor (vocab, d), floating
        The head's weight (``nn.Linear`` layout).
    labels : Tensor (...), int64 or int32
        Target ids, ``hidden``'s leading shape; ``ignore_index`` marks rows without a target.
    bias : Tensor (vocab,), optional
    shift : bool, default=True
        Position ``i`` predicts ``labels[..., i + 1]`` (transformers' shift: labels padded with
        ``ignore_index`` at the end); ``False``: position ``i`` predicts ``labels[..., i]``.
    ignore_index : int, default=-100
    reduction : {"mean", "sum"}, default="mean"
        ``"mean"`` over the rows with a target (NaN when there is none, as ``cross_entropy``).
    num_items_in_batch : Tensor or int, optional
        Given (transformers' ``Trainer`` under gradient accumulation): the sum divided by it.
    chunk_rows : int, optional
        Rows per chunk (default: as many as keep one chunk's fp32 logits under 64 MiB).

    Returns
    -------
    Tensor
        The scalar loss (float32).

    Raises
    ------
    TypeError
        A tensor argument of the wrong kind (not floating, not integer labels, wrong rank); ``ignore_index``
        not an int.
    ValueError
        Mismatched shapes; a label outside ``[0, vocab)`` that is not ``ignore_index``; ``reduction`` or
        ``chunk_rows`` invalid.

    Examples
    --------
    >>> import torch
    >>> from thrifty.compress import linear_cross_entropy
    >>> _ = torch.manual_seed(0)
    >>> h = torch.randn(2, 16, 8, requires_grad=True)
    >>> w = torch.randn(100, 8, requires_grad=True)
    >>> labels = torch.randint(0, 100, (2, 16))
    >>> loss = linear_cross_entropy(h, w, labels, chunk_rows=5)
    >>> targets = torch.nn.functional.pad(labels, (0, 1), value=-100)[:, 1:].reshape(-1)
    >>> ref = torch.nn.functional.cross_entropy((h @ w.T).view(-1, 100), targets)
    >>> torch.allclose(loss, ref)
    True
    >>> gh, gw = torch.autograd.grad(loss, (h, w))
    >>> rh, rw = torch.autograd.grad(ref, (h, w))
    >>> torch.allclose(gh, rh, atol=1e-6) and torch.allclose(gw, rw, atol=1e-6)
    True
    """
    _check_loss_args(hidden, weight, labels, bias, ignore_index, reduction, chunk_rows)
    _checks.check_bool("shift", shift)
    vocab, d = weight.shape
    targets = nn.functional.pad(labels, (0, 1), value=ignore_index)[..., 1:] if shift else labels
    targets = targets.reshape(-1).to(torch.int64)
    if has_data(targets):
        bad = (targets != ignore_index) & ((targets < 0) | (targets >= vocab))
        if bool(bad.any()):
            raise ValueError(f"labels: holds ids outside [0, {vocab}) other than ignore_index={ignore_index}")
    h2d = hidden.reshape(-1, d)
    chunk = chunk_rows if chunk_rows is not None else max(1, _CHUNK_BYTES // (4 * vocab))
    # A Python number is checked; a tensor (transformers' Trainer passes one) is not read back,
    # which would synchronise the device on every step.
    if num_items_in_batch is not None and not isinstance(num_items_in_batch, Tensor):
        items = num_items_in_batch
        if isinstance(items, bool) or not isinstance(items, numbers.Real):
            raise TypeError(f"num_items_in_batch: expected a positive number, got {type(items).__name__}")
        if not items > 0:  # NaN too
            raise ValueError(f"num_items_in_batch: must be > 0, got {items!r}")
    denom = num_items_in_batch if num_items_in_batch is not None else (1.0 if reduction == "sum" else None)
    loss: Tensor = _LinearCrossEntropy.apply(h2d, weight, bias, targets, ignore_index, chunk,
                                             _compute_dtype(hidden, weight), denom)  # fmt: skip
    return loss


def _head_of(model: nn.Module) -> nn.Module:
    names = {c.__name__ for c in type(model).__mro__}
    if not names & _CAUSAL_LMS:
        raise TypeError(
            f"model: lean_loss supports transformers' {', '.join(sorted(_CAUSAL_LMS))} (whose loss is "
            f"cross_entropy(lm_head(hidden))), got {type(model).__name__}"
        )
    head = model.get_output_embeddings()  # type: ignore[operator]
    if type(head) is not nn.Linear:
        raise TypeError(
            f"model: its output embedding is a {type(head).__name__}, not a plain torch.nn.Linear (apply lean_loss "
            "before stac_r)"
        )
    return head


def _lean_forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The causal LM's forward with the loss from :func:`linear_cross_entropy` (no logits) when labels are given."""
    labels = kwargs.pop("labels", None)
    if labels is None or kwargs.get("logits_to_keep", 0) not in (0, None) or len(args) > 1:
        if labels is not None:
            kwargs["labels"] = labels
        return type(self).forward(self, *args, **kwargs)
    num_items = kwargs.pop("num_items_in_batch", None)
    kwargs.pop("logits_to_keep", None)
    head = self.get_output_embeddings()  # type: ignore[operator]
    out = self.base_model(*args, **kwargs)  # type: ignore[operator]
    loss = linear_cross_entropy(out[0], head.weight, labels, head.bias, num_items_in_batch=num_items,
                                chunk_rows=getattr(self, "_thrifty_chunk_rows", None))  # fmt: skip
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return CausalLMOutputWithPast(
        loss=loss, logits=None, hidden_states=getattr(out, "hidden_states", None),
        attentions=getattr(out, "attentions", None),
    )  # fmt: skip


def lean_loss(model: M, *, chunk_rows: int | None = None, inplace: bool = False) -> M:
    """Compute a causal LM's training loss with :func:`linear_cross_entropy`: no full-vocabulary logits.

    The model's ``forward`` with ``labels`` returns the same loss (transformers' shift, ``ignore_index=-100``,
    mean over the targets, or the sum over ``num_items_in_batch`` as ``Trainer`` passes it) and the same
    gradients to float rounding, with ``logits=None``; without ``labels`` (inference, generation) it is the
    model's own forward. Parameters, ``state_dict`` and weight tying are untouched; the fp32 log-softmax over
    the vocabulary is not saved (GPT-2: 196 MiB per 1024 tokens). Apply it before
    :func:`~thrifty.compress.stac_r`; :func:`~thrifty.compress.predict` with ``PredictConfig(lean=True)``
    counts its saving on the model as shipped.

    Parameters
    ----------
    model : transformers causal LM
        ``GPT2LMHeadModel``, ``GPTNeoXForCausalLM``, ``LlamaForCausalLM``, ``Qwen2ForCausalLM``,
        ``MistralForCausalLM`` or ``OPTForCausalLM`` (or a subclass). Not modified unless ``inplace=True``.
    chunk_rows : int, optional
        Rows per chunk of the loss (see :func:`linear_cross_entropy`).
    inplace : bool, default=False
        Modify ``model`` itself instead of a deep copy.

    Returns
    -------
    The model with the lean loss (``model`` itself if ``inplace=True``).

    Raises
    ------
    TypeError
        ``model`` is not one of those classes, or its head is not a plain ``nn.Linear``; ``inplace`` not a bool.
    ValueError
        ``chunk_rows`` is not a positive int.

    Examples
    --------
    >>> import torch, transformers
    >>> from thrifty.compress import lean_loss
    >>> _ = torch.manual_seed(0)
    >>> cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=500, n_positions=64)
    >>> model = transformers.GPT2LMHeadModel(cfg).eval()
    >>> lean = lean_loss(model)
    >>> ids = torch.randint(0, 500, (2, 16))
    >>> out = lean(input_ids=ids, labels=ids)
    >>> out.logits is None, torch.allclose(out.loss, model(input_ids=ids, labels=ids).loss)
    (True, True)
    """
    head = _head_of(model) if isinstance(model, nn.Module) else None
    if head is None:
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    _checks.check_bool("inplace", inplace)
    if chunk_rows is not None and (isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1):
        raise ValueError(f"chunk_rows: expected None or a positive int, got {chunk_rows!r}")
    target = model if inplace else copy.deepcopy(model)
    target.forward = functools.partial(_lean_forward, target)  # a partial pickles and deep-copies with the model
    target._thrifty_chunk_rows = chunk_rows  # type: ignore[assignment]
    return target


def has_lean_loss(model: nn.Module) -> bool:
    """Whether :func:`lean_loss` was applied to ``model``."""
    fwd = model.__dict__.get("forward")
    return isinstance(fwd, functools.partial) and fwd.func is _lean_forward
