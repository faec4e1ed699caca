"""The Hugging Face side: ``GPT2LMHeadModel`` in PyTorch eager mode with ``torch.optim.AdamW``,
and PyTorch's attention."""

from __future__ import annotations

from typing import Any

import numpy as np

from .harness import median, time_calls


class HfTrainer:
    """The same architecture, optimizer, batch and loss as :class:`bench.training_zoo.ZooTrainer`."""

    def __init__(self, arch: dict[str, int], hparams: dict[str, float], tokens: np.ndarray):
        import torch
        import transformers

        torch.manual_seed(0)
        config = transformers.GPT2Config(
            vocab_size=arch["vocab_size"], n_positions=arch["n_positions"],
            n_embd=arch["n_embd"], n_layer=arch["n_layer"], n_head=arch["n_head"],
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
            bos_token_id=arch["vocab_size"] - 1,  # GPT-2's <|endoftext|> is the last id
            eos_token_id=arch["vocab_size"] - 1,
        )  # fmt: skip
        self.model = transformers.GPT2LMHeadModel(config).to(torch.float32)
        self.model.train()
        self.attention = getattr(self.model.config, "_attn_implementation", None)
        kwargs: dict[str, Any] = dict(
            lr=hparams["lr"], betas=(hparams["b1"], hparams["b2"]), eps=hparams["eps"],
            weight_decay=hparams["weight_decay"],
        )  # fmt: skip
        try:  # the fused CPU kernel is torch's fastest AdamW; fall back where it is missing
            self.optimizer = torch.optim.AdamW(self.model.parameters(), fused=True, **kwargs)
            self.optimizer_impl = "fused"
        except (RuntimeError, TypeError, ValueError):
            self.optimizer = torch.optim.AdamW(self.model.parameters(), **kwargs)
            self.optimizer_impl = "default"
        self.input_ids = torch.as_tensor(tokens[:, :-1], dtype=torch.long)
        self.targets = torch.as_tensor(tokens[:, 1:], dtype=torch.long)
        self.num_params = sum(p.numel() for p in self.model.parameters())
        self.vocab = arch["vocab_size"]
        self.first_step_s = time_calls(self._step, 1)[0]

    def _step(self) -> None:
        import torch.nn.functional as functional

        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(self.input_ids).logits
        loss = functional.cross_entropy(logits.reshape(-1, self.vocab), self.targets.reshape(-1))
        loss.backward()
        self.optimizer.step()
        self.loss = float(loss.detach())

    def run(self, steps: int) -> list[float]:
        """Seconds per step for ``steps`` steps."""
        return time_calls(self._step, steps)


def torch_attention_s(
    batch: int, seq_len: int, heads: int, head_dim: int, repeats: int = 5
) -> dict[str, Any]:
    """Median seconds of one causal ``scaled_dot_product_attention`` forward+backward (what
    transformers' ``sdpa`` calls)."""
    import torch

    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(batch, heads, seq_len, head_dim, generator=g).requires_grad_() for _ in range(3)
    )

    def step() -> None:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        (out * out).sum().backward()

    step()
    return {"seconds": median(time_calls(step, repeats)), "kernel": "sdpa"}
