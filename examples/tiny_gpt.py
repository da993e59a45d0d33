"""A byte-level GPT and a corpus that ships with Python, for the compression benchmark, the tour and tests.

The model is nanoGPT-style: token + position embeddings, ``n_layer`` pre-LayerNorm blocks (causal
self-attention through ``scaled_dot_product_attention``, GELU MLP of width ``4 * n_embd``), a final
LayerNorm and an untied head. Every block has four ``nn.Linear`` layers (``attn.qkv``, ``attn.proj``,
``mlp.fc1``, ``mlp.fc2``), so the default 4-layer model has 16 Linears plus the head.

The corpus is ``pydoc_data.topics`` (Python's own documentation topics, ~465k characters) encoded as
UTF-8 bytes (vocabulary 256). The split is fixed: topics are sorted by name and the last 10% of the
concatenated bytes is the validation set.

Example
-------
>>> import torch
>>> from tiny_gpt import GPT, GPTConfig, load_corpus, get_batch
>>> train, val = load_corpus()
>>> model = GPT(GPTConfig(n_layer=1, n_embd=32, n_head=2, block_size=16))
>>> x, y = get_batch(train, 4, 16, torch.Generator().manual_seed(0))
>>> logits, loss = model(x, y)
>>> tuple(logits.shape)
(4, 16, 256)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTConfig:
    """Model size. Defaults: the benchmark's 4 layers, width 256, 4 heads, context 128, bytes."""

    n_layer: int = 4
    n_embd: int = 256
    n_head: int = 4
    block_size: int = 128
    vocab_size: int = 256
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"n_embd={cfg.n_embd} must be divisible by n_head={cfg.n_head}")
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.fc2 = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Byte-level GPT. ``forward(idx (B, T) int64, targets (B, T) int64 | None) -> (logits (B, T, V), loss | None)``."""

    def __init__(self, cfg: GPTConfig | None = None) -> None:
        super().__init__()
        cfg = cfg or GPTConfig()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith(("proj.weight", "fc2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        t = idx.shape[1]
        if t > self.cfg.block_size:
            raise ValueError(f"sequence length {t} exceeds block_size={self.cfg.block_size}")
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def load_corpus(val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """The pydoc_data topics as uint8 byte tensors ``(train, val)``; fixed split (last ``val_fraction``)."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    data = torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8)
    n_val = int(len(data) * val_fraction)
    return data[:-n_val].clone(), data[-n_val:].clone()


def get_batch(
    data: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows: inputs (B, T) int64 and next-byte targets (B, T) int64, drawn with ``generator``."""
    ix = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator)
    x = torch.stack([data[i : i + block_size] for i in ix.tolist()]).long()
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix.tolist()]).long()
    return x, y


@torch.no_grad()
def evaluate(model: nn.Module, data: torch.Tensor, batch_size: int, block_size: int, n_batches: int = 8) -> float:
    """Mean cross-entropy (nats/byte) over ``n_batches`` fixed windows (seed 1234) of ``data``."""
    was_training = model.training
    model.eval()
    g = torch.Generator().manual_seed(1234)
    losses = []
    for _ in range(n_batches):
        x, y = get_batch(data, batch_size, block_size, g)
        losses.append(float(model(x, y)[1]))
    model.train(was_training)
    return sum(losses) / len(losses)


def make_optimizer(model: nn.Module, lr: float = 1e-3) -> torch.optim.Optimizer:
    """AdamW (betas 0.9/0.95, weight decay 0.1 on matrices only), the nanoGPT recipe."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


if __name__ == "__main__":
    import time

    torch.manual_seed(0)
    train, val = load_corpus()
    model = GPT()
    opt = make_optimizer(model)
    g = torch.Generator().manual_seed(0)
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters; {len(train):,} train bytes")
    for step in range(20):
        t0 = time.perf_counter()
        x, y = get_batch(train, 16, 128, g)
        loss = model(x, y)[1]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step:3d} loss {loss.item():.3f} ({time.perf_counter() - t0:.2f} s)")
    print(f"val loss {evaluate(model, val, 16, 128):.3f}")
