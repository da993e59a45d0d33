"""STAC-R inside transformers' ``Trainer``: gradient accumulation, bf16 autocast, gradient checkpointing and a
resumed checkpoint that takes the same next step as the uninterrupted run (tiny GPT-2 from a configuration)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from thrifty.compress import CompressedLinear, stac_r  # noqa: E402

SEQ, VOCAB = 16, 96


def _gpt2(seed: int = 0) -> Any:
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=64, n_layer=2, n_head=2, resid_pdrop=0.1, embd_pdrop=0.1,
        attn_pdrop=0.0,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg)


def _compressed(seed: int = 0) -> Any:
    return stac_r(_gpt2(seed), 8, inplace=True, seed=3)


class _Tokens(torch.utils.data.Dataset):  # type: ignore[misc]
    def __init__(self, n: int = 32) -> None:
        g = torch.Generator().manual_seed(7)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _args(out: Path, **kw: Any) -> Any:
    base: dict[str, Any] = dict(
        output_dir=str(out), per_device_train_batch_size=4, gradient_accumulation_steps=2, max_steps=4,
        learning_rate=1e-3, bf16=True, use_cpu=True, activation_checkpointing=True,
        activation_checkpointing_kwargs={"use_reentrant": False}, save_strategy="steps", save_steps=2,
        logging_steps=1, report_to=[], seed=11, dataloader_num_workers=0, disable_tqdm=True,
    )  # fmt: skip
    base.update(kw)
    return transformers.TrainingArguments(**base)


def _losses(trainer: Any) -> list[tuple[int, float]]:
    return [(int(e["step"]), float(e["loss"])) for e in trainer.state.log_history if "loss" in e]


def test_trainer_resume_takes_the_same_next_step(tmp_path: Path) -> None:
    full = transformers.Trainer(model=_compressed(), args=_args(tmp_path / "full"), train_dataset=_Tokens())
    full.train()
    full_losses = _losses(full)
    assert len(full_losses) == 4 and all(math.isfinite(v) for _, v in full_losses)
    layers = [m for m in full.model.modules() if isinstance(m, CompressedLinear)]
    assert len(layers) == 9  # every Conv1D projection and the tied head
    assert all(m.state.step == 8 for m in layers)  # 4 steps × 2 micro-batches; recomputations not counted
    assert all(m.config is not None and not m.config.exact for m in layers)
    assert all(m.state.dense_bytes == m.state.rows * m.in_features * 2 for m in layers)  # bf16 autocast ran

    resumed = transformers.Trainer(model=_compressed(), args=_args(tmp_path / "full"), train_dataset=_Tokens())
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "checkpoint-2"))
    after = _losses(resumed)
    assert resumed.state.global_step == 4 and [s for s, _ in after] == [1, 2, 3, 4]  # 1, 2 read from the checkpoint
    assert after == full_losses  # steps 3 and 4 recomputed after resuming: the same losses, bit for bit
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name  # weights and the STAC-R state (bases, counters, generators)
    for m, r in zip(layers, (m for m in resumed.model.modules() if isinstance(m, CompressedLinear)), strict=True):
        assert m.state.step == r.state.step and torch.equal(m.codec.u, r.codec.u)


@pytest.mark.parametrize("reentrant", [False, True])
def test_gradient_checkpointing_gives_the_plain_compressed_gradients(reentrant: bool) -> None:
    ids = torch.randint(0, VOCAB, (4, SEQ), generator=torch.Generator().manual_seed(1))
    grads = []
    for checkpointing in (False, True):
        model = _compressed()
        model.train()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
        for step in range(3):  # the third step uses bases refreshed twice: recomputation must not refresh again
            torch.manual_seed(step)  # the same dropout masks in both runs (checkpointing replays the RNG)
            model.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        layers = [m for m in model.modules() if isinstance(m, CompressedLinear)]
        assert all(m.state.step == 3 and m.codec.step == 3 for m in layers)
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    plain, ckpt = grads
    assert plain.keys() == ckpt.keys() and len(plain) > 10
    for name, g in plain.items():
        torch.testing.assert_close(ckpt[name], g, rtol=1e-5, atol=1e-6, msg=name)


def test_stac_state_rides_in_the_state_dict_and_plain_checkpoints_still_load() -> None:
    torch.manual_seed(0)
    lin = torch.nn.Linear(48, 24)
    layer = CompressedLinear(lin, 4)
    assert set(layer.state_dict()) == {"weight", "bias"}  # nothing learnt yet: the Linear's keys
    layer(torch.randn(64, 48)).sum().backward()
    sd = layer.state_dict()
    assert set(sd) == {"weight", "bias", "_extra_state"} and sd["_extra_state"].dtype == torch.uint8
    other = CompressedLinear(torch.nn.Linear(48, 24), 4)
    other.load_state_dict(sd)  # strict
    assert other.config == layer.config and other.state == layer.state and torch.equal(other.codec.u, layer.codec.u)
    assert torch.equal(other._sampler.get_state(), layer._sampler.get_state())
    other.load_state_dict(lin.state_dict())  # a plain Linear's checkpoint, strict: the STAC-R state is kept
    assert torch.equal(other.codec.u, layer.codec.u)
    bad = dict(sd, _extra_state=torch.zeros(5, dtype=torch.uint8))
    with pytest.raises(ValueError, match="_extra_state"):
        other.load_state_dict(bad)
    narrow = CompressedLinear(torch.nn.Linear(32, 24), 4)
    with pytest.raises(ValueError, match="does not fit width"):
        narrow.load_state_dict({"weight": torch.zeros(24, 32), "bias": torch.zeros(24), "_extra_state": sd["_extra_state"]})
