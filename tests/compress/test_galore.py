"""GaLore projector / AdamW reimplementation and the Turbo path (projected gradients from STAC-R factors)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from thrifty.compress import (
    GaLoreAdamW,
    GaLoreProjector,
    SavedBytesMeter,
    TurboLinear,
    _kernels,
    galore_turbo,
    stac_r,
)
from thrifty.compress._galore import project_from_factors, right_state_fits, shared_basis


def _structured(n: int, d: int, rank: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, rank, generator=g) @ torch.randn(rank, d, generator=g) + 0.05 * torch.randn(n, d, generator=g)


@pytest.mark.parametrize(("m", "d", "side"), [(48, 32, "right"), (32, 48, "left"), (40, 40, "right")])
def test_projector_matches_svd_definition(m: int, d: int, side: str) -> None:
    g = torch.Generator().manual_seed(m * d)
    grad = torch.randn(m, d, generator=g)
    proj = GaLoreProjector(8, update_proj_gap=3, scale=0.5)
    low = proj.project(grad, 0)
    u, _s, vh = torch.linalg.svd(grad.double(), full_matrices=False)
    assert proj.side == side
    if side == "right":
        want = grad.double() @ vh[:8].t()
        assert low.shape == (m, 8)
        back = want @ vh[:8]  # grad·VVᵀ: independent of the singular vectors' signs
    else:
        want = u[:, :8].t() @ grad.double()
        assert low.shape == (8, d)
        back = u[:, :8] @ want
    # singular vectors are defined up to sign: compare magnitudes per component and the projected-back matrix
    torch.testing.assert_close(low.double().abs(), want.abs(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(proj.project_back(low).double(), 0.5 * back, rtol=1e-4, atol=1e-4)
    # refresh schedule: steps 1, 2 keep P, step 3 refreshes (GaLore: step % gap == 0)
    proj.project(torch.randn(m, d, generator=g), 1)
    proj.project(torch.randn(m, d, generator=g), 2)
    assert proj.refreshes == 1
    proj.project(torch.randn(m, d, generator=g), 3)
    assert proj.refreshes == 2


def test_galore_adamw_matches_a_hand_written_loop() -> None:
    torch.manual_seed(0)
    w0 = torch.randn(24, 16)
    grads = [torch.randn(24, 16) for _ in range(4)]
    p = nn.Parameter(w0.clone())
    opt = GaLoreAdamW([{"params": [p], "rank": 4, "update_proj_gap": 2, "scale": 0.25}], lr=0.01, weight_decay=0.1)
    for gr in grads:
        p.grad = gr.clone()
        opt.step()
    # reference: explicit GaLore AdamW in float64
    w = w0.double().clone()
    m1 = v1 = None
    ortho = None
    for t, gr in enumerate(grads):
        g = gr.double()
        if t % 2 == 0:
            ortho = torch.linalg.svd(g, full_matrices=False)[2][:4]  # right (m >= d): top-4 rows of Vh
        assert ortho is not None
        low = g @ ortho.t()
        m1 = 0.1 * low if m1 is None else 0.9 * m1 + 0.1 * low
        v1 = 0.001 * low * low if v1 is None else 0.999 * v1 + 0.001 * low * low
        step = 0.01 * math.sqrt(1 - 0.999 ** (t + 1)) / (1 - 0.9 ** (t + 1))
        w = w - step * 0.25 * ((m1 / (v1.sqrt() + 1e-6)) @ ortho)
        w = w - 0.01 * 0.1 * w
    # sign flips of singular vectors cancel in the update (low and P flip together)
    torch.testing.assert_close(p.detach().double(), w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("coef", "density", "bits"), [("int8", 0.0, 8), ("bf16", 0.05, 8), ("int8", 0.1, 4), ("fp32", 0.05, 8)]
)
@pytest.mark.parametrize(("m", "d"), [(96, 64), (40, 64)])
def test_projection_from_factors_equals_projecting_the_full_gradient(
    coef: str, density: float, bits: int, m: int, d: int
) -> None:
    x = _structured(200, d, 6, seed=m + d)
    u = torch.linalg.qr(torch.randn(d, 12, generator=torch.Generator().manual_seed(1))).Q.contiguous()
    k = round(density * 32)
    factors = tuple(_kernels.compress(x, u, coef=coef, block=32, k=k, bits=bits))
    g = torch.randn(200, m, generator=torch.Generator().manual_seed(2))
    full = _kernels.grad_weight(g, u, *factors, d=d, block=32, bits=bits)  # the unshared path's grad_W
    proj = GaLoreProjector(5)
    want = proj.project(full, 0)
    assert proj.ortho is not None and proj.side is not None
    got = project_from_factors(g, u, factors, proj.ortho, proj.side, d=d, block=32, bits=bits)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))


def test_shared_refresh_in_the_exact_basis_spans_galores_subspace() -> None:
    x = _structured(300, 32, 5, seed=9)
    u = torch.eye(32)
    factors = tuple(_kernels.compress(x, u, coef="fp32", block=32, k=0))
    for m in (48, 20):
        g = torch.randn(300, m, generator=torch.Generator().manual_seed(m))
        full = g.t() @ x
        proj = GaLoreProjector(4)
        proj.refresh(full)
        assert proj.ortho is not None and proj.side is not None
        mine = shared_basis(g, u, factors, 4, proj.side)
        # compare the orthogonal projectors onto the two subspaces (bases are defined up to sign)
        a = proj.ortho.t() @ proj.ortho if proj.side == "right" else proj.ortho @ proj.ortho.t()
        b = mine.t() @ mine if proj.side == "right" else mine @ mine.t()
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)


def _mlp() -> nn.Module:
    torch.manual_seed(11)
    return nn.Sequential(nn.Linear(32, 96), nn.GELU(), nn.Linear(96, 32), nn.Tanh(), nn.Linear(32, 8))


def _batches(n: int) -> list[torch.Tensor]:
    return [_structured(128, 32, 6, seed=100 + i) for i in range(n)]


def _train_recording_bases(
    runs: list[tuple[nn.Module, torch.optim.Optimizer]], layers: list[TurboLinear], steps: int
) -> list[list[torch.Tensor]]:
    """``steps`` training steps of every (model, optimizer) pair on the same batches; after each step, the
    STAC-R basis of each of ``layers``."""
    bases: list[list[torch.Tensor]] = []
    for x in _batches(steps):
        for model, opt in runs:
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        bases.append([t.codec.u for t in layers])
    return bases


def test_turbo_svd_refresh_gives_the_unshared_updates() -> None:
    wrapped = stac_r(_mlp(), ratio=4, seed=0)
    twin = copy.deepcopy(wrapped)
    lin = [m.weight for m in twin.modules() if hasattr(m, "codec")]
    ids = {id(p) for p in lin}
    opt_ref = GaLoreAdamW(
        [{"params": [p for p in twin.parameters() if id(p) not in ids]},
         {"params": lin, "rank": 4, "update_proj_gap": 2, "scale": 0.25}], lr=1e-2,
    )  # fmt: skip
    opt = galore_turbo(wrapped, rank=4, update_proj_gap=2, scale=0.25, refresh="svd", lr=1e-2)
    assert sum(isinstance(m, TurboLinear) for m in wrapped.modules()) == 3
    for step, x in enumerate(_batches(5)):
        for model, o in ((twin, opt_ref), (wrapped, opt)):
            o.zero_grad()
            model(x).square().mean().backward()
        turbo_layers = [m for m in wrapped.modules() if isinstance(m, TurboLinear)]
        if step % 2 == 1:  # between refreshes: only the projection exists, no (m, d) gradient
            assert all(t.weight.grad is None and t.low.grad is not None for t in turbo_layers)
        opt_ref.step()
        opt.step()
        for a, b in zip(twin.parameters(), wrapped.parameters()):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_turbo_shared_refresh_never_forms_the_weight_gradient_and_trains() -> None:
    wrapped = stac_r(_mlp(), ratio=4, seed=0)
    opt = galore_turbo(wrapped, rank=4, update_proj_gap=3, scale=1.0, refresh="shared", lr=3e-3)
    target = torch.randn(128, 8, generator=torch.Generator().manual_seed(5)) * 0.1
    losses = []
    for x in _batches(12):
        opt.zero_grad()
        loss = (wrapped(x) - target).square().mean()
        loss.backward()
        for t in wrapped.modules():
            if isinstance(t, TurboLinear):
                assert t.weight.grad is None and t.low.grad is not None
                assert t.low.grad.shape == t.low.shape
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]
    layer = next(m for m in wrapped.modules() if isinstance(m, TurboLinear))
    assert layer.projector.refreshes == 4  # steps 0, 3, 6, 9
    assert opt.state_bytes() > 0


def test_shared_schedule_refreshes_stac_basis_with_galore() -> None:
    wrapped = stac_r(_mlp(), ratio=4, seed=0)
    opt = galore_turbo(wrapped, rank=4, update_proj_gap=3, refresh="shared", share_schedule=True, lr=1e-3)
    layers = [m for m in wrapped.modules() if isinstance(m, TurboLinear)]
    bases = _train_recording_bases([(wrapped, opt)], layers, 4)
    for i, layer in enumerate(layers):  # "all" (True): every layer, left-projected ones included
        assert layer.share_basis
        assert bases[1][i] is bases[0][i] and bases[2][i] is bases[0][i]  # planned at step 0, kept for 1, 2
        assert bases[3][i] is not bases[0][i]  # refreshed at step 3, with GaLore's projector
        assert layer.projector.refreshes == 2
    with pytest.raises(TypeError, match="share_schedule"):
        galore_turbo(stac_r(_mlp()), share_schedule=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="share_schedule"):
        galore_turbo(stac_r(_mlp()), share_schedule="left")


def test_default_schedule_shares_right_projected_layers_only() -> None:
    # a residual in the plan, so that dropping it is visible
    wrapped = stac_r(_mlp(), ratio=4, seed=0, residual_density=0.1, residual_bits=8)
    opt = galore_turbo(wrapped, rank=4, update_proj_gap=3, proj_type="std")  # GaLore's sides kept
    layers = [m for m in wrapped.modules() if isinstance(m, TurboLinear)]
    assert [t.side for t in layers] == ["right", "left", "left"]  # (96, 32), (32, 96), (8, 32) weights
    bases = _train_recording_bases([(wrapped, opt)], layers, 4)
    right, lefts = layers[0], layers[1:]
    assert right.share_basis and right.drop_residual
    assert right.codec.config is not None and right.codec.config.k == 0  # no residual stored
    assert bases[1][0] is bases[0][0] and bases[2][0] is bases[0][0] and bases[3][0] is not bases[0][0]
    for i, left in enumerate(lefts, start=1):  # per-batch STAC-R refresh and residual kept
        assert not left.share_basis and not left.drop_residual
        assert left.codec.config is not None and left.codec.config.k > 0
        assert len({id(b[i]) for b in bases}) == 4
    # refresh="svd" keeps the unshared schedule by default (its updates equal STAC-R + GaLoreAdamW's)
    plain = stac_r(_mlp(), ratio=4, seed=0)
    galore_turbo(plain, rank=4, refresh="svd")
    assert all(t.schedule == "none" for t in plain.modules() if isinstance(t, TurboLinear))


def test_auto_side_projects_left_layers_on_the_right_when_they_can_share() -> None:
    wrapped = stac_r(_mlp(), ratio=4, seed=0, residual_density=0.1, residual_bits=8)
    std = copy.deepcopy(wrapped)
    opt = galore_turbo(wrapped, rank=4, update_proj_gap=3)  # proj_type="auto" (the default)
    opt_std = galore_turbo(std, rank=4, update_proj_gap=3, proj_type="std")
    layers = [m for m in wrapped.modules() if isinstance(m, TurboLinear)]
    assert [t.side for t in layers] == ["right", "left", "left"]  # GaLore's sides until the plan is known
    bases = _train_recording_bases([(wrapped, opt), (std, opt_std)], layers, 4)
    flipped = 0
    for i, t in enumerate(layers):
        cfg = t.codec.config
        assert cfg is not None
        m, d = t.out_features, t.in_features
        fits = cfg.rank >= min(4, m, d)
        if m < d and fits:  # went right: shares the schedule, stores no residual, P is (r, d)
            flipped += 1
            assert t.side == "right" and t.projector.side == "right" and t.share_basis and t.drop_residual
            assert t.low.shape == (m, 4) and t.projector.ortho is not None and t.projector.ortho.shape == (4, d)
            assert cfg.k == 0 and len({id(b[i]) for b in bases}) == 2  # basis refreshed at steps 0 and 3 only
        elif m < d:  # STAC-R's rank cannot hold P: stays left, per-batch refresh
            assert t.side == "left" and not t.share_basis and len({id(b[i]) for b in bases}) == 4
    assert flipped >= 1
    assert opt.state_bytes() < opt_std.state_bytes()  # the right layout's state is smaller when m < d
    # the memory rule itself: right state within 1% of the left one's, exactly when m <= ~d
    assert right_state_fits(1024, 4096, 32) and right_state_fits(512, 512, 8)
    assert not right_state_fits(4096, 1024, 32)
    # "auto" is GaLore's "std" when nothing is shared
    for kw in ({"refresh": "svd"}, {"share_schedule": "none"}):
        plain = stac_r(_mlp(), ratio=4, seed=0)
        o = galore_turbo(plain, rank=4, **kw)  # type: ignore[arg-type]
        plain(_batches(1)[0]).square().mean().backward()
        o.step()
        assert [t.side for t in plain.modules() if isinstance(t, TurboLinear)] == ["right", "left", "left"]
    with pytest.raises(ValueError, match="proj_type"):
        galore_turbo(stac_r(_mlp()), proj_type="up")


@pytest.mark.parametrize(("coef", "tol", "d", "m"), [("fp32", 2e-5, 128, 256), ("int8", 1e-2, 128, 256),
                                                     ("int8", 1e-2, 256, 96)])  # fmt: skip
def test_right_projection_is_exact_with_an_aged_basis(coef: str, tol: float, d: int, m: int) -> None:
    """Right projection + shared schedule: Gᵀ·X·Pᵀ up to coefficient quantisation, however stale the basis
    (m < d: a layer GaLore would project on the left, projected on the right by proj_type="auto")."""
    n = 192
    torch.manual_seed(3)
    wrapped = stac_r(nn.Sequential(nn.Linear(d, m)), rank=8, coef_dtype=coef, residual_density=0.05, seed=0)
    opt = galore_turbo(wrapped, rank=4, update_proj_gap=100, scale=1.0, lr=1e-3)
    layer = wrapped[0]
    assert isinstance(layer, TurboLinear)
    assert layer.side == ("right" if m >= d else "left")
    x_a = _structured(n, d, 6, seed=1)  # the basis and P are refreshed on this distribution (step 0)
    gen = torch.Generator().manual_seed(7)
    t_out = torch.randn(n, m, generator=gen)
    opt.zero_grad()
    with SavedBytesMeter(exclude=wrapped) as meter_a:
        y_a = wrapped(x_a)
    (y_a * t_out).sum().backward()
    opt.step()
    u_aged, p = layer.codec.u, layer.projector.ortho
    assert u_aged is not None and p is not None and layer.drop_residual
    assert layer.side == "right" and p.shape == (4, d)
    # a batch from another distribution: the aged basis captures little of it
    x_b = _structured(n, d, 6, seed=2) * 3.0
    captured = float((x_b @ u_aged).square().sum() / x_b.square().sum())
    assert captured < 0.25
    g_b = torch.randn(n, m, generator=gen)  # dLoss/dy for loss = sum(y * g_b)
    opt.zero_grad()
    with SavedBytesMeter(exclude=wrapped) as meter:
        y_b = wrapped(x_b)
    (y_b * g_b).sum().backward()
    # between refreshes X is encoded in Pᵀ (4 columns) instead of U (8 columns, the refresh step's)
    coef_bytes = 4 if coef == "fp32" else 1
    assert meter_a.peak_bytes - meter.peak_bytes == n * 4 * coef_bytes + d * 4 * 4
    assert layer.codec.u is u_aged and layer.projector.ortho is p  # no refresh at step 1
    assert layer.low.grad is not None
    got = layer.low.grad.double()
    exact = (g_b.double().t() @ x_b.double()) @ p.double().t()  # from the uncompressed input, same P
    rel = float(torch.linalg.norm(got - exact) / torch.linalg.norm(exact))
    assert rel < tol
    # the full weight gradient of the same factors is far off: the exactness comes from P lying in span(U)
    xhat = (x_b @ u_aged) @ u_aged.t()
    full_rel = float(torch.linalg.norm(g_b.t() @ (xhat - x_b)) / torch.linalg.norm(g_b.t() @ x_b))
    assert full_rel > 0.5


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="model"):
        galore_turbo(nn.Sequential(nn.ReLU()))
    with pytest.raises(TypeError, match="model"):
        galore_turbo("model")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="refresh"):
        galore_turbo(stac_r(_mlp()), refresh="fast")
    with pytest.raises(ValueError, match="rank"):
        galore_turbo(stac_r(_mlp()), rank=0)
    with pytest.raises(ValueError, match="proj_type"):
        GaLoreProjector(4, proj_type="diagonal")
    with pytest.raises(ValueError, match="2-D"):
        GaLoreAdamW([{"params": [nn.Parameter(torch.zeros(3))], "rank": 2}])
    with pytest.raises(ValueError, match="lr"):
        GaLoreAdamW([nn.Parameter(torch.zeros(3))], lr=-1.0)
    with pytest.raises(RuntimeError, match="project"):
        GaLoreProjector(2).project_back(torch.zeros(2, 2))
    # project's arguments (before: IndexError "tuple index out of range" for a 1-D gradient, torch's
    # t() message for 3-D, AttributeError for an int, an SVD convergence error for NaN)
    proj = GaLoreProjector(2)
    for grad, exc, match in (
        (torch.randn(5), ValueError, r"grad: GaLore projects 2-D \(m, d\) gradients, got shape \(5,\)"),
        (torch.randn(2, 3, 4), ValueError, "grad: GaLore projects 2-D"),
        (3, TypeError, "grad: expected a Tensor"),
        (torch.ones(6, 4, dtype=torch.int64), TypeError, "grad: expected a floating-point tensor"),
        (torch.full((6, 4), float("nan")), ValueError, "grad: contains NaN"),
    ):
        with pytest.raises(exc, match=match):
            proj.project(grad, 0)  # type: ignore[arg-type]
    assert proj.project(torch.randn(6, 4), torch.tensor(0)).shape == (6, 2)  # a 0-d integer tensor is a step
    for step, exc in ((-1, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(exc, match="step"):
            proj.project(torch.randn(6, 4), step)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"grad: shape \(6, 5\) does not match the basis \(2, 4\)"):
        proj.project(torch.randn(6, 5), 1)


def test_docstring_examples() -> None:
    import doctest

    from thrifty.compress import _galore

    result = doctest.testmod(_galore, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
