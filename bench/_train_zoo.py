"""The zoo side of the training-throughput comparison: one jitted AdamW train step."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

# What a user gets: the contract's default order (``chunked`` on CPU, see the attention
# benchmark for why). The kernel that served is recorded with the results.
ATTENTION: str | None = None


def zoo_config(arch: dict[str, int], attention: str | None = ATTENTION) -> Any:
    """zoo's GPT-2 architecture with ``arch``'s shapes (float32, no dropout)."""
    import zoo_models

    d = arch["n_embd"]
    return zoo_models.get("gpt2").replace(
        vocab_size=arch["vocab_size"],
        d_model=d,
        n_layers=arch["n_layer"],
        n_heads=arch["n_head"],
        mlp_hidden=4 * d,
        max_position=arch["n_positions"],
        dropout=0.0,
        param_dtype="float32",
        compute_dtype="float32",
        bos_token_id=None,
        eos_token_id=None,
        attention_implementation=attention,
    )


class ZooTrainer:
    """Builds the model, the optax AdamW optimizer and zoo-train's train step; runs steps.

    ``tokens`` is an int array ``[B, T + 1]``; inputs are ``tokens[:, :-1]``, targets
    ``tokens[:, 1:]``.
    """

    def __init__(
        self,
        arch: dict[str, int],
        hparams: dict[str, float],
        tokens: np.ndarray,
        attention: str | None = ATTENTION,
    ):
        import jax
        import jax.numpy as jnp
        import optax

        import zoo_attention
        import zoo_models
        import zoo_train

        self.config = zoo_config(arch, attention)
        model = zoo_models.build(self.config, key=jax.random.key(0))
        optimizer = optax.adamw(
            hparams["lr"],
            b1=hparams["b1"],
            b2=hparams["b2"],
            eps=hparams["eps"],
            weight_decay=hparams["weight_decay"],
        )

        def loss_fn(model: Any, batch: dict, key: jax.Array) -> tuple[jax.Array, dict]:
            # Plain next-token cross entropy, no packing: the same work as the torch side.
            del key
            logits = model(batch["input_ids"])
            ce, _ = zoo_train.token_losses(logits, batch["targets"])
            return jnp.sum(ce), {"weight": jnp.asarray(ce.size, jnp.float32)}

        self.state = zoo_train.init_train_state(model, optimizer)
        self.step_fn = zoo_train.make_train_step(
            optimizer, loss_fn, optax.constant_schedule(hparams["lr"])
        )
        self.batch = {
            "input_ids": jnp.asarray(tokens[:, :-1], jnp.int32),
            "targets": jnp.asarray(tokens[:, 1:], jnp.int32),
        }
        self.num_params = sum(x.size for x in jax.tree.leaves(self.state.params))
        self.loss: float | None = None
        start = time.perf_counter()
        self._step()  # compiles
        self.first_step_s = time.perf_counter() - start
        resolution = zoo_attention.last_resolution()
        self.attention = None if resolution is None else str(resolution.kernel)

    def _step(self) -> None:
        import jax

        self.state, metrics = self.step_fn(self.batch, self.state)
        jax.block_until_ready((self.state, metrics))
        self.loss = float(metrics["loss"])

    def run(self, steps: int) -> list[float]:
        """Seconds per step for ``steps`` steps."""
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            self._step()
            times.append(time.perf_counter() - start)
        return times
