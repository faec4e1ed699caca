"""Mixture of experts: the dropless layer does the work of the experts each token uses, not of all.

Two measurements, in this process, on the CPU:

- **FLOPs.** XLA's cost analysis of the compiled forward of one ``zoo_layers.MoE`` (8 experts,
  top-2) against the FLOPs of the active experts (each token through its 2 experts' gated MLPs,
  and the router) and of all the experts; for each grouped-matmul implementation (``tiled``,
  the CPU default; ``ragged_dot``, which XLA:CPU lowers to every group on every row) and the
  dense reference (``zoo_layers.testing.dense_moe``).
- **Step time.** Forward and backward of a tiny Mixtral-shaped block (RMSNorm, attention with
  GQA, RMSNorm, the MoE) against the same block with the dense reference in place of the layer,
  interleaved rounds, medians.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .harness import median, new_result, table, target, time_calls

NAME = "moe"
TITLE = "Mixture of experts: compiled FLOPs and block step time against the dense reference"
EXPERTS, TOP_K = 8, 2
FLOPS_TARGET, SPEED_TARGET = 1.3, 2.5


def _setup(quick: bool) -> dict[str, Any]:
    # Mixtral's proportions (expert width 3.5 x the model width), scaled down.
    shape = {"d_model": 128, "expert_hidden": 448, "heads": 4, "kv_heads": 2}
    return {**shape, "batch": 32 if quick else 64, "seq_len": 128, "rounds": 3 if quick else 5}


def _layer(setup: dict[str, Any], implementation: str | None, key: Any) -> Any:
    import zoo_layers as zl

    d, hidden = setup["d_model"], setup["expert_hidden"]
    return zl.MoE(d, hidden, EXPERTS, TOP_K, implementation=implementation, key=key)


def _flops(fn: Callable[..., Any], *args: Any) -> float:
    import jax

    cost = jax.jit(fn).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    assert cost is not None  # XLA:CPU has a cost model
    return float(cost["flops"])


def measure_flops(setup: dict[str, Any]) -> dict[str, Any]:
    """Compiled forward FLOPs of the layer per implementation and of the dense reference."""
    import jax

    from zoo_layers.testing import dense_moe

    d, hidden = setup["d_model"], setup["expert_hidden"]
    tokens = setup["batch"] * setup["seq_len"]
    key = jax.random.key(0)
    x = jax.random.normal(key, (setup["batch"], setup["seq_len"], d))
    per_expert = 3 * 2 * d * hidden  # gate, up and down projections of one token
    router = 2 * d * EXPERTS
    out = {
        "tokens": tokens,
        "active": tokens * (TOP_K * per_expert + router),
        "all": tokens * (EXPERTS * per_expert + router),
        "compiled": {},
    }
    for name in ("tiled", "ragged_dot"):
        moe = _layer(setup, name, key)
        out["compiled"][name] = _flops(lambda m, x: m(x)[0], moe, x)
    out["compiled"]["dense reference"] = _flops(dense_moe, _layer(setup, None, key), x)
    return out


def measure_step(setup: dict[str, Any]) -> dict[str, Any]:
    """Forward+backward seconds of the block with the layer and with the dense reference."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import zoo_layers as zl
    from zoo_layers.testing import dense_moe

    d = setup["d_model"]
    k_attn, k_moe, k_x = jax.random.split(jax.random.key(1), 3)
    block = zl.TransformerBlock(
        attn_norm=zl.RMSNorm(d),
        attn=zl.Attention(d, setup["heads"], num_kv_heads=setup["kv_heads"], key=k_attn),
        mlp_norm=zl.RMSNorm(d),
        mlp=_layer(setup, None, k_moe),
    )
    b, t = setup["batch"], setup["seq_len"]
    x = jax.random.normal(k_x, (b, t, d))
    positions = jnp.broadcast_to(jnp.arange(t), (b, t))

    def dense_block(block: zl.TransformerBlock, x: jax.Array) -> jax.Array:
        # As built above: both norms, and a mixture-of-experts layer.
        assert block.attn_norm is not None and block.mlp_norm is not None
        assert isinstance(block.mlp, zl.MoE)
        h = x + block.attn(block.attn_norm(x), positions)
        return h + dense_moe(block.mlp, block.mlp_norm(h))

    def moe_block(block: zl.TransformerBlock, x: jax.Array) -> jax.Array:
        return block(x, positions)

    def step(forward: Callable[..., jax.Array]) -> Callable[[], Any]:
        grad = eqx.filter_jit(eqx.filter_grad(lambda blk, x: jnp.sum(forward(blk, x) ** 2)))
        jax.block_until_ready(grad(block, x))  # compile
        return lambda: jax.block_until_ready(grad(block, x))

    runs = {"moe": step(moe_block), "dense": step(dense_block)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(setup["rounds"]):  # interleaved: A B A B
        for name, fn in runs.items():
            times[name] += time_calls(fn, 3)
    return {name: median(ts) for name, ts in times.items()} | {"samples": times}


def run(quick: bool) -> dict[str, Any]:
    """Both measurements; a result dict (see :mod:`bench.harness`)."""
    setup = _setup(quick)
    flops, step = measure_flops(setup), measure_step(setup)
    result = new_result(NAME, TITLE, quick)
    result["data"] = {"setup": setup, "flops": flops, "step": step}
    return report(result)


def report(result: dict[str, Any]) -> dict[str, Any]:
    """Tables and targets from the stored numbers."""
    data = result["data"]
    setup, flops, step = data["setup"], data["flops"], data["step"]
    shape = (
        f"{EXPERTS} experts, top-{TOP_K}, width {setup['d_model']}, expert hidden "
        f"{setup['expert_hidden']}, {setup['batch']} x {setup['seq_len']} tokens, float32, CPU."
    )
    rows = [
        [name, f"{v / 1e9:.3f}", f"{v / flops['active']:.2f}x", f"{v / flops['all']:.2f}x"]
        for name, v in flops["compiled"].items()
    ]
    rows.append(["active experts (formula)", f"{flops['active'] / 1e9:.3f}", "1.00x", ""])
    rows.append(["all experts (formula)", f"{flops['all'] / 1e9:.3f}", "", "1.00x"])
    speedup = step["dense"] / step["moe"]
    result["tables"] = [
        table(
            "Compiled forward FLOPs of one MoE layer (XLA cost analysis)",
            ["computed by", "GFLOP", "vs active", "vs all experts"],
            rows,
            [shape],
        ),
        table(
            "Forward+backward of a Mixtral-shaped block: dropless layer vs dense reference",
            ["block", "median ms", "speed-up"],
            [
                ["MoE (tiled grouped matmul)", f"{step['moe'] * 1e3:.1f}", f"{speedup:.2f}x"],
                ["dense reference (every expert)", f"{step['dense'] * 1e3:.1f}", "1.00x"],
            ],
            [shape + f" Attention: {setup['heads']} heads, {setup['kv_heads']} key/value heads."],
        ),
    ]
    ratio = flops["compiled"]["tiled"] / flops["active"]
    result["targets"] = [
        target(
            f"compiled MoE layer FLOPs within {FLOPS_TARGET}x of the active experts'",
            f"{ratio:.2f}x (all experts: {flops['all'] / flops['active']:.1f}x)",
            ratio <= FLOPS_TARGET,
        ),
        target(
            f"block step >= {SPEED_TARGET}x faster than the dense reference on CPU",
            f"{speedup:.2f}x",
            speedup >= SPEED_TARGET,
        ),
    ]
    return result
