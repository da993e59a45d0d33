"""predict: bad input and misuse give clear errors or warnings, and leave the model as it was."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from thrifty.compress import PredictConfig, predict, stac_r


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def test_model_without_linear() -> None:
    with pytest.raises(ValueError, match="model: has no torch.nn.Linear"):
        predict(nn.Sequential(nn.Conv1d(3, 4, 3), nn.ReLU()), torch.randn(2, 3, 8))


def test_not_a_module_or_already_compressed() -> None:
    with pytest.raises(TypeError, match="model"):
        predict(lambda x: x, torch.randn(2, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="already a CompressedLinear"):
        predict(stac_r(_model()), torch.randn(8, 16))


def test_batch_of_wrong_shape_is_a_value_error_and_restores_grads() -> None:
    model = _model()
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    grads = [p.grad for p in model.parameters()]
    with pytest.raises(ValueError, match="batch: the model's forward failed"):
        predict(model, torch.randn(8, 15))
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))
    assert model.training


def test_unknown_optimizer_warns_what_it_assumed() -> None:
    model = _model()
    with pytest.warns(UserWarning, match="does not know Adagrad; it assumed 2 state tensors"):
        rep = predict(model, torch.randn(64, 16), optimizer=torch.optim.Adagrad(model.parameters()))
    assert "Adagrad" in rep.optimizer and "assumed" in rep.optimizer
    nbytes = sum(p.numel() * 4 for p in model.parameters())
    assert rep.optimizer_bytes == 2 * nbytes + 4 * len(list(model.parameters()))
    with pytest.raises(ValueError, match="optimizer: unknown name"):
        predict(model, torch.randn(8, 16), optimizer="lion")
    with pytest.raises(TypeError, match="optimizer"):
        predict(model, torch.randn(8, 16), optimizer=3)


def test_inside_no_grad_warns_and_still_predicts() -> None:
    model = _model()
    with torch.no_grad():
        with pytest.warns(UserWarning, match="inside torch.no_grad"):
            rep = predict(model, torch.randn(64, 16), optimizer="sgd")
        assert not torch.is_grad_enabled()  # the caller's mode is untouched
    assert rep.saved_bytes > 0


def test_inside_inference_mode_is_an_error() -> None:
    model = _model()
    with torch.inference_mode(), pytest.raises(RuntimeError, match="inference_mode"):
        predict(model, torch.randn(8, 16))


def test_bad_config_and_loss() -> None:
    model = _model()
    x = torch.randn(8, 16)
    with pytest.raises(TypeError, match="config"):
        predict(model, x, config="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ratio"):
        predict(model, x, config=0.5)
    with pytest.raises(ValueError, match="unknown keys"):
        predict(model, x, config={"ratoi": 8})
    with pytest.raises(TypeError, match="plan_all"):
        predict(model, x, config=PredictConfig(plan_all="yes"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="plan_all"):
        predict(model, x, config={"plan_all": [1]})
    with pytest.raises(ValueError, match="loss_fn: expected a scalar"):
        predict(model, x, loss_fn=lambda out: out)
    with pytest.raises(ValueError, match="does not require grad"):
        predict(model, x, loss_fn=lambda out: torch.tensor(1.0))
    with pytest.raises(ValueError, match="layers"):
        predict(model, x, config={"layers": "nope"})


def test_frozen_layers_are_reported_not_saved() -> None:
    model = _model()
    model[2].weight.requires_grad_(False)
    model[2].bias.requires_grad_(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = predict(model, torch.randn(32, 16, requires_grad=True), optimizer="sgd")
    assert not rep["2"].accepted and "not saved" in rep["2"].reason


def test_plan_with_nothing_accepted() -> None:
    model = nn.Sequential(nn.Linear(16, 4))
    rep = predict(model, torch.randn(32, 16), optimizer="sgd")  # the input needs no grad: nothing saved
    assert rep.accepted == () and rep.surface_bytes == 0 and rep.predicted_reduction == 0
    with pytest.raises(ValueError, match="accepts no layer"):
        stac_r(model, plan=rep)
