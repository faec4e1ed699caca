"""Worker process for one side of the training comparison (``python -m bench._train_worker``).

Config (JSON argv[1]): ``framework`` ("zoo" or "hf"), ``arch``, ``hparams``, ``batch``,
``seq_len``, ``threads``, and for zoo ``attention`` (the kernel name). Requests: ``{"op": "run", "steps": k}`` -> ``{"times": [...]}``;
``{"op": "peak"}`` -> this framework's matmul GFLOP/s; ``{"op": "gemms", "shapes": {...}}`` ->
GFLOP/s at the model's GEMM shapes; ``{"op": "attention", "shape": [B, T, N, H]}`` -> seconds of
one causal attention forward+backward.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

from ._worker import serve


def main() -> None:
    config = json.loads(sys.argv[1])
    threads = int(config["threads"])
    if config["framework"] == "hf":
        import torch

        torch.set_num_threads(threads)
        from ._attention_time import torch_attention_s as attention
        from ._peak import torch_gemm_gflops as gemms
        from ._peak import torch_matmul_gflops as peak
        from ._train_hf import HfTrainer as Trainer
    else:
        from ._attention_time import jax_attention_s as attention  # type: ignore[assignment]
        from ._peak import jax_gemm_gflops as gemms  # type: ignore[assignment]
        from ._peak import jax_matmul_gflops as peak  # type: ignore[assignment]
        from ._train_zoo import ZooTrainer as Trainer  # type: ignore[assignment]

    arch = config["arch"]
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, arch["vocab_size"], (config["batch"], config["seq_len"] + 1))
    start = time.perf_counter()
    if config["framework"] == "hf":
        trainer: Any = Trainer(arch, config["hparams"], tokens)
    else:
        trainer = Trainer(arch, config["hparams"], tokens, config.get("attention"))
    setup_s = time.perf_counter() - start
    hello = {
        "num_params": int(trainer.num_params),
        "setup_s": setup_s,
        "first_step_s": trainer.first_step_s,
        "attention": trainer.attention,
        "optimizer_impl": getattr(trainer, "optimizer_impl", "optax.adamw"),
        "loss": trainer.loss,
    }
    serve(
        {
            "run": lambda r: {"times": trainer.run(int(r["steps"])), "loss": trainer.loss},
            "peak": lambda r: peak(),
            "gemms": lambda r: gemms({k: tuple(v) for k, v in r["shapes"].items()}),
            "attention": lambda r: attention(*r["shape"]),
        },
        hello,
    )


if __name__ == "__main__":
    main()
