"""One side of the fused cross-entropy comparison in its own process
(``python -m bench.cross_entropy_worker``), so its peak RSS is its own.

Config (JSON argv[1]): ``arch`` (GPT-2 shapes), ``batch``, ``seq_len``, ``steps``, ``seed``;
the parent sets ``ZOO_CROSS_ENTROPY`` (``logits``: the unfused loss; ``fused_xla``). The
hello reports the kernel that served, the compiled step's temporaries and the compile time.
Requests: ``step`` -> ``{"loss", "seconds"}`` (the next of ``steps`` batches); ``rss`` -> the
process's peak resident set in bytes.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from typing import Any

# The step compiled ahead of time (for its memory figures) is found again by its first call in
# a compilation cache of this process's own.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="zoo-ce-bench-"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import numpy as np

from .harness import serve
from .training_zoo import zoo_config

HPARAMS = {"lr": 3e-4, "b1": 0.9, "b2": 0.95, "eps": 1e-8, "weight_decay": 0.1}


def batches(arch: dict[str, int], batch: int, seq_len: int, steps: int, seed: int) -> list[dict]:
    """``steps`` batches of random tokens in the train step's layout (every token counted)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        tokens = rng.integers(0, arch["vocab_size"], (batch, seq_len + 1)).astype(np.int32)
        out.append(
            {
                "input_ids": tokens[:, :-1],
                "targets": tokens[:, 1:],
                "positions": np.broadcast_to(np.arange(seq_len, dtype=np.int32), (batch, seq_len)),
                "segment_ids": np.ones((batch, seq_len), np.int32),
                "loss_mask": np.ones((batch, seq_len), np.float32),
            }
        )
    return out


class Side:
    """GPT-2 with zoo-train's default loss and train step, AdamW, float32."""

    def __init__(self, config: dict[str, Any]) -> None:
        import jax
        import optax

        import zoo_attention
        import zoo_models
        import zoo_train

        arch = config["arch"]
        model = zoo_models.build(zoo_config(arch), key=jax.random.key(0))
        optimizer = optax.adamw(
            HPARAMS["lr"], b1=HPARAMS["b1"], b2=HPARAMS["b2"], eps=HPARAMS["eps"],
            weight_decay=HPARAMS["weight_decay"],
        )  # fmt: skip
        self.state = zoo_train.init_train_state(model, optimizer)
        self.step_fn = zoo_train.make_train_step(
            optimizer, zoo_train.make_lm_loss(), optax.constant_schedule(HPARAMS["lr"])
        )
        self.batches = batches(
            arch, config["batch"], config["seq_len"], config["steps"], config["seed"]
        )
        start = time.perf_counter()
        with zoo_attention.recording() as log:
            compiled = self.step_fn.lower(self.batches[0], self.state).compile()
        self.compile_s = time.perf_counter() - start
        memory = compiled.memory_analysis()
        self.temp_bytes = int(memory.temp_size_in_bytes)
        self.kernel = [f"{r.kernel} {r.version}" for r in log.cross_entropy]
        self.index = 0

    def step(self) -> dict[str, Any]:
        import jax

        batch = self.batches[self.index % len(self.batches)]
        self.index += 1
        start = time.perf_counter()
        self.state, metrics = self.step_fn(batch, self.state)
        jax.block_until_ready((self.state, metrics))
        return {"loss": float(metrics["loss"]), "seconds": time.perf_counter() - start}


def peak_rss() -> int:
    """This process's peak resident set size in bytes (Linux reports kibibytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    import jax

    config = json.loads(sys.argv[1])
    side = Side(config)
    hello = {
        "kernel": side.kernel,
        "temp_bytes": side.temp_bytes,
        "compile_s": side.compile_s,
        "num_params": sum(int(x.size) for x in jax.tree.leaves(side.state.params)),
    }
    serve({"step": lambda r: side.step(), "rss": lambda r: {"peak_rss": peak_rss()}}, hello)


if __name__ == "__main__":
    main()
