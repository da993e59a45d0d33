"""SavedBytesMeter: exact byte counts with storage de-duplication, release on graph death, attribution."""

from __future__ import annotations

import gc

import pytest
import torch

from thrifty.compress._meter import SavedBytesMeter


class _Save(torch.autograd.Function):
    """Saves exactly the extra tensors it is given; returns sum(x)."""

    @staticmethod
    def forward(ctx, x, *extra):  # type: ignore[no-untyped-def]
        ctx.shape = x.shape
        ctx.n_extra = len(extra)
        ctx.save_for_backward(*extra)
        return x.sum()

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        first = ctx.saved_tensors  # unpack twice: unpacking must not release anything
        assert len(ctx.saved_tensors) == len(first)
        return (g * torch.ones(ctx.shape),) + (None,) * ctx.n_extra


def _save(x: torch.Tensor, *extra: torch.Tensor) -> torch.Tensor:
    return _Save.apply(x, *extra)  # type: ignore[no-any-return]


def test_views_and_repeats_count_one_storage() -> None:
    x = torch.randn(6, 5, requires_grad=True)
    a = torch.randn(10, 7)  # 280 bytes
    b = torch.randn(3, dtype=torch.float64)  # 24 bytes
    with SavedBytesMeter() as m:
        loss = _save(x, a, a, a.t(), a[2:5], a.view(70), b)
    assert m.saved_bytes == 10 * 7 * 4 + 3 * 8
    assert m.peak_bytes == 304
    assert m.packs == 6
    assert len(m.records) == 2
    assert m.records[0].packs == 5 and m.records[0].shape == (10, 7)
    loss.backward()
    assert m.saved_bytes == 0
    assert m.peak_bytes == 304
    assert m.total_bytes == 304


def test_release_when_graph_dropped_without_backward() -> None:
    x = torch.randn(4, requires_grad=True)
    with SavedBytesMeter() as m:
        loss1 = _save(x, torch.zeros(100, dtype=torch.bfloat16))  # 200 bytes
        loss2 = _save(x, torch.zeros(50, dtype=torch.int8))  # 50 bytes
        assert m.saved_bytes == 250
        del loss1
        gc.collect()
        assert m.saved_bytes == 50
        loss3 = _save(x, torch.zeros(10, dtype=torch.uint8))
        assert m.saved_bytes == 60
    assert m.peak_bytes == 250
    del loss2, loss3
    gc.collect()
    assert m.saved_bytes == 0


def test_slice_counts_the_whole_storage() -> None:
    """A saved slice keeps its whole storage alive, so the whole storage is counted."""
    base = torch.randn(1000)
    x = torch.randn(3, requires_grad=True)
    with SavedBytesMeter() as m:
        keep = _save(x, base[:10])
    assert m.saved_bytes == 4000
    del keep
    gc.collect()
    assert m.saved_bytes == 0


def test_linear_excluding_parameters_counts_the_input() -> None:
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 3)
    x = torch.randn(2, 5, 8, requires_grad=True)  # Linear saves a 2-D view of x and weight.t()
    with SavedBytesMeter(exclude=lin) as m:
        y = lin(x).sum()
    assert m.saved_bytes == 2 * 5 * 8 * 4
    with SavedBytesMeter() as m_all:
        y2 = lin(x).sum()
    assert m_all.saved_bytes == 2 * 5 * 8 * 4 + 3 * 8 * 4  # + the weight's storage
    y.backward()
    y2.backward()
    assert m.saved_bytes == 0 and m_all.saved_bytes == 0


def test_exclude_by_tensors_and_callable() -> None:
    x = torch.randn(3, requires_grad=True)
    a, b = torch.randn(16), torch.randn(8)
    with SavedBytesMeter(exclude=[a]) as m1:
        keep1 = _save(x, a, a.view(4, 4), b)
    assert m1.saved_bytes == 32
    with SavedBytesMeter(exclude=lambda t: t.numel() == 8) as m2:
        keep2 = _save(x, a, b)
    assert m2.saved_bytes == 64
    del keep1, keep2


def test_attribution_to_modules() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.GELU(), torch.nn.Linear(6, 2))
    x = torch.randn(10, 4, requires_grad=True)
    named = [(n, mod) for n, mod in model.named_modules() if isinstance(mod, torch.nn.Linear)]
    with SavedBytesMeter(exclude=model, modules=named) as m:
        model(x).sum().backward()
    # Linear 0 saves x (10x4 fp32); GELU saves its input (10x6, not attributed); Linear 2 saves GELU's output.
    assert m.by_module == {"0": 160, "2": 240}
    assert m.total_bytes == 160 + 240 + 240
    assert m.saved_bytes == 0


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="exclude"):
        SavedBytesMeter(exclude=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exclude"):
        SavedBytesMeter(exclude=[1, 2])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="modules"):
        SavedBytesMeter(modules=[torch.nn.Linear(2, 2)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="modules must be an iterable .* got int"):  # before: "'int' object is not iterable"
        SavedBytesMeter(modules=3)  # type: ignore[arg-type]
    m = SavedBytesMeter()
    with m, pytest.raises(RuntimeError, match="already active"):
        m.__enter__()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_counts_and_peak() -> None:
    x = torch.randn(3, device="cuda", requires_grad=True)
    a = torch.randn(256, 256, device="cuda")
    with SavedBytesMeter() as m:
        loss = _save(x, a, a.t())
    assert m.saved_bytes == 256 * 256 * 4
    assert m.cuda_peak_bytes is not None and m.cuda_peak_bytes >= 0
    loss.backward()
    assert m.saved_bytes == 0
