"""One side of the training comparison in its own process (``python -m bench.training_worker``).

Config (JSON argv[1]): ``framework`` ("zoo" or "hf"), ``arch``, ``hparams``, ``batch``,
``seq_len``, ``threads``, ``attention`` (zoo's kernel name, ``None`` for its default). Requests:
``run`` (``steps``) -> ``{"times": [...], "loss": ...}``; ``peak`` -> this framework's matmul
GFLOP/s; ``gemms`` (``shapes``) -> GFLOP/s at the model's GEMM shapes; ``attention``
(``shape`` ``[B, T, N, H]``) -> seconds of one causal attention forward+backward.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

from .harness import gemm_gflops, matmul_peak, serve


def main() -> None:
    config = json.loads(sys.argv[1])
    arch = config["arch"]
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, arch["vocab_size"], (config["batch"], config["seq_len"] + 1))
    start = time.perf_counter()
    if config["framework"] == "hf":
        import torch

        from .training_hf import HfTrainer, torch_attention_s

        torch.set_num_threads(int(config["threads"]))
        trainer: Any = HfTrainer(arch, config["hparams"], tokens)
        framework, attention = "torch", torch_attention_s
    else:
        from .training_zoo import ZooTrainer, jax_attention_s

        trainer = ZooTrainer(arch, config["hparams"], tokens, config.get("attention"))
        framework, attention = "jax", jax_attention_s
    hello = {
        "num_params": int(trainer.num_params),
        "setup_s": time.perf_counter() - start,
        "first_step_s": trainer.first_step_s,
        "attention": trainer.attention,
        "optimizer_impl": trainer.optimizer_impl,
        "loss": trainer.loss,
    }
    serve(
        {
            "run": lambda r: {"times": trainer.run(int(r["steps"])), "loss": trainer.loss},
            "peak": lambda r: matmul_peak(framework),
            "gemms": lambda r: gemm_gflops(
                framework, {k: tuple(v) for k, v in r["shapes"].items()}
            ),
            "attention": lambda r: attention(*r["shape"]),
        },
        hello,
    )


if __name__ == "__main__":
    main()
