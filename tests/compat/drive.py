"""Train a tiny model for a few steps in this environment and compare its logits with ``xla``.

Run inside an environment built from wheels; prints one JSON object on the last line of stdout:
the zoo versions installed, the kernels registered (attention and grouped matmul) and refused, the kernel that served the
training run and what the run recorded of it, the losses, and the largest logit difference between that kernel and ``xla``.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import zoo_attention
import zoo_models
import zoo_train
from zoo_train import data as zdata


def _logits(model, ids: jax.Array) -> np.ndarray:
    # A function of its own, so traced afresh: attention is resolved under the current
    # ZOO_ATTENTION. One compiled program, not one per operation as an eager call would be.
    return np.asarray(eqx.filter_jit(lambda m, x: m(x))(model, ids), dtype=np.float64)


def _grouped_kernels() -> dict[str, str]:
    """The grouped-matmul kernels registered here (none with a zoo-attention before them)."""
    grouped = getattr(zoo_attention, "grouped", None)
    return {} if grouped is None else {n: k.version for n, k in grouped.kernels().items()}


def main(out: str) -> None:
    warnings: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warnings.append(record.getMessage())

    logging.getLogger("zoo_attention").addHandler(Collect(level=logging.WARNING))
    text = "\n\n".join(
        Path(zoo_attention.__file__).parent.joinpath(p).read_text() for p in ("_api.py", "_spec.py")
    )
    tokenizer = zdata.byte_tokenizer()
    docs = [tokenizer.encode(chunk) for chunk in text.split("\n\n") if chunk.strip()]
    loader = zdata.PackedLoader(docs, seq_len=32, seed=0)
    config = zoo_train.TrainConfig(
        steps=4,
        batch_size=2,
        checkpoint_every=2,
        eval_every=0,
        log_every=1,
        progress=False,
        plot=False,
        async_checkpointing=False,
        optimizer=zoo_train.OptimizerConfig(lr=3e-3, warmup_steps=1),
    )
    # ZOO_COMPAT_MODEL: another preset (gpt-oss-tiny asks the kernel for sinks).
    preset = os.environ.get("ZOO_COMPAT_MODEL", "llama-tiny")
    model = zoo_models.build(zoo_models.get(preset), key=jax.random.key(0))
    with zoo_attention.recording() as log:
        result = zoo_train.train(model, loader, config=config, out=out)
    served = [r.as_dict() for r in log]
    metrics = zoo_train.read_metrics(Path(out) / zoo_train.METRICS_FILE)
    losses = [r["loss"] for r in metrics if "loss" in r]
    checkpoints = zoo_train.Checkpointer(Path(out) / zoo_train.CHECKPOINT_DIR)
    try:
        meta = checkpoints.read_meta(checkpoints.steps()[-1])
    finally:
        checkpoints.close()

    ids = jnp.asarray(np.random.default_rng(0).integers(0, 256, (2, 48)), jnp.int32)
    with_kernel = _logits(result.model, ids)
    os.environ["ZOO_ATTENTION"] = "xla"
    with_xla = _logits(result.model, ids)
    report = {
        "zoo": {
            d.metadata["Name"]: d.version
            for d in importlib.metadata.distributions()
            if d.metadata["Name"].startswith("zoo-")
        },
        "kernels": {name: k.version for name, k in zoo_attention.kernels().items()},
        "grouped_kernels": _grouped_kernels(),
        "refused": {r.name: r.reason for r in zoo_attention.refused_kernels()},
        "served": served,
        # What the run wrote down: the start record of metrics.jsonl and the last checkpoint.
        "recorded": {
            "metrics": next(r["attention"] for r in metrics if r.get("event") == "start"),
            "checkpoint": meta["provenance"]["attention"],
            "checkpoint_packages": meta["provenance"]["packages"],
        },
        "losses": losses,
        "warnings": warnings,
        "max_logit_diff_vs_xla": float(np.max(np.abs(with_kernel - with_xla))),
        "logits_finite": bool(np.all(np.isfinite(with_kernel))),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
