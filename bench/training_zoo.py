"""The zoo side of the training comparison: one jitted AdamW train step, and zoo's attention."""

from __future__ import annotations

from typing import Any

import numpy as np

from .harness import median, time_calls

# What a user gets: the contract's default order (``chunked`` on CPU, see the attention
# benchmark for why). The kernel that served is recorded with the results.
ATTENTION: str | None = None


def zoo_config(arch: dict[str, int], attention: str | None = ATTENTION) -> Any:
    """zoo's GPT-2 architecture with ``arch``'s shapes (float32, no dropout)."""
    import zoo_models

    d = arch["n_embd"]
    return zoo_models.get("gpt2").replace(
        vocab_size=arch["vocab_size"], d_model=d, n_layers=arch["n_layer"],
        n_heads=arch["n_head"], mlp_hidden=4 * d, max_position=arch["n_positions"], dropout=0.0,
        param_dtype="float32", compute_dtype="float32", bos_token_id=None, eos_token_id=None,
        attention_implementation=attention,
    )  # fmt: skip


def sum_loss(model: Any, batch: dict, key: Any) -> tuple[Any, dict]:
    """Plain next-token cross entropy summed over the batch, no packing: the torch side's work."""
    import jax.numpy as jnp

    import zoo_train

    del key
    ce, _ = zoo_train.token_losses(model(batch["input_ids"]), batch["targets"])
    return jnp.sum(ce), {"weight": jnp.asarray(ce.size, jnp.float32)}


class ZooTrainer:
    """The model, optax AdamW and zoo-train's train step on one batch ``tokens`` ``[B, T + 1]``
    (inputs ``tokens[:, :-1]``, targets ``tokens[:, 1:]``)."""

    optimizer_impl = "optax.adamw"

    def __init__(
        self, arch: dict[str, int], hparams: dict[str, float], tokens: np.ndarray,
        attention: str | None = ATTENTION,
    ) -> None:  # fmt: skip
        import jax
        import jax.numpy as jnp
        import optax

        import zoo_attention
        import zoo_models
        import zoo_train

        model = zoo_models.build(zoo_config(arch, attention), key=jax.random.key(0))
        optimizer = optax.adamw(
            hparams["lr"], b1=hparams["b1"], b2=hparams["b2"], eps=hparams["eps"],
            weight_decay=hparams["weight_decay"],
        )  # fmt: skip
        self.state = zoo_train.init_train_state(model, optimizer)
        self.step_fn = zoo_train.make_train_step(
            optimizer, sum_loss, optax.constant_schedule(hparams["lr"])
        )
        self.batch = {
            "input_ids": jnp.asarray(tokens[:, :-1], jnp.int32),
            "targets": jnp.asarray(tokens[:, 1:], jnp.int32),
        }
        self.num_params = sum(x.size for x in jax.tree.leaves(self.state.params))
        self.loss: float | None = None
        with zoo_attention.recording() as log:
            self.first_step_s = time_calls(self._step, 1)[0]  # compiles
        self.attention = None if log.last is None else str(log.last.kernel)

    def _step(self) -> None:
        import jax

        self.state, metrics = self.step_fn(self.batch, self.state)
        jax.block_until_ready((self.state, metrics))
        self.loss = float(metrics["loss"])

    def run(self, steps: int) -> list[float]:
        """Seconds per step for ``steps`` steps."""
        return time_calls(self._step, steps)


def jax_attention_s(batch: int, seq_len: int, heads: int, head_dim: int, repeats: int = 5) -> dict:
    """Median seconds of one causal attention forward+backward through ``zoo_attention``'s
    default kernel, compiled with the train step's options."""
    import jax
    import jax.numpy as jnp

    import zoo_attention
    import zoo_train

    keys = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(kx, (batch, seq_len, heads, head_dim)) for kx in keys)

    def loss(q: Any, k: Any, v: Any) -> Any:
        out = zoo_attention.dot_product_attention(q, k, v, is_causal=True)
        return jnp.sum(out * out)

    options = zoo_train.step_compiler_options()
    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)), compiler_options=options)
    with zoo_attention.recording() as log:
        jax.block_until_ready(grad(q, k, v))  # traces: resolves the kernel
    times = time_calls(lambda: jax.block_until_ready(grad(q, k, v)), repeats)
    return {"seconds": median(times), "kernel": None if log.last is None else log.last.kernel}
