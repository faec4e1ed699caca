"""``plan_call`` against a NumPy count of the blocks a mask touches, and against what the lowered
TPU module declares (cost estimate, scoped VMEM limit); ``flash_attention(vmem_limit_bytes=)``."""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_flash_tpu import BlockSizes, flash_attention, generation_for, plan_call

V5E = "TPU v5 lite"


def _blocks_touched(t: int, s: int, bq: int, bk: int, window: int | None) -> int:
    """(query block, key block) pairs holding at least one visible causal (windowed) pair."""
    i, j = np.arange(t)[:, None], np.arange(s)[None, :]
    mask = (j <= i) if window is None else (j <= i) & (j >= i - window)
    tp, sp = -(-t // bq) * bq, -(-s // bk) * bk
    padded = np.zeros((tp, sp), bool)
    padded[:t, :s] = mask
    return int(padded.reshape(tp // bq, bq, sp // bk, bk).any(axis=(1, 3)).sum())


@pytest.mark.parametrize("window", [None, 100])
@pytest.mark.parametrize("heads", [None, 1])
def test_forward_traffic_counts_the_blocks_the_mask_touches(
    window: int | None, heads: int | None
) -> None:
    rng = np.random.default_rng(0 if window is None else window)
    b, t, n, k, h = 2, int(rng.integers(700, 1100)), 8, 2, 96  # H pads to 128, T to blocks
    q = jax.ShapeDtypeStruct((b, t, n, h), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((b, t, k, h), jnp.bfloat16)
    blocks = BlockSizes(128, 256, 256, 128)
    plan = plan_call(
        q, kv, device_kind=V5E, is_causal=True, block_sizes=blocks, heads_per_step=heads,
        local_window=None if window is None else (window, 0),
    )  # fmt: skip
    per_step = heads or n // k  # the policy takes the whole group of 4 per step
    assert plan.heads_per_step == per_step and plan.blocks == blocks
    pairs = _blocks_touched(t, t, 128, 256, window)
    assert plan.forward_steps == pairs * b * (n // per_step)
    assert plan.forward_kv_bytes == plan.forward_steps * 2 * 256 * 128 * 2
    tp = -(-t // 256) * 256  # padded to both query block sizes
    q_side = b * tp * n * 128 * 2
    assert plan.forward_bytes == 2 * q_side + plan.forward_kv_bytes + b * n * tp * 4
    assert plan.vmem_limit_bytes == generation_for(V5E).vmem_limit_bytes


def test_the_policys_own_blocks_fit_its_budget_and_one_head_per_step_plans_alone() -> None:
    q = jax.ShapeDtypeStruct((1, 8192, 16, 128), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((1, 8192, 2, 128), jnp.bfloat16)
    grouped = plan_call(q, kv, device_kind=V5E, is_causal=True)
    alone = plan_call(q, kv, device_kind=V5E, is_causal=True, heads_per_step=1)
    budget = generation_for(V5E).budget_bytes
    for plan in (grouped, alone):
        assert max(plan.forward_vmem_bytes, plan.backward_vmem_bytes) <= budget
    assert (grouped.heads_per_step, alone.heads_per_step) == (8, 1)
    if grouped.blocks.block_kv == alone.blocks.block_kv:
        assert alone.forward_kv_bytes == 8 * grouped.forward_kv_bytes


def _kernel_configs(text: str) -> dict[str, dict]:
    """Each Mosaic kernel's backend config in a lowered TPU module, by kernel name."""
    out = {}
    for config, name in re.findall(r'backend_config = "(.*?)", kernel_name = "(\w+)"', text):
        out[name] = json.loads(config.replace("\\22", '"').replace("\\0A", "\n"))
    return out


@pytest.mark.parametrize("limit", [None, 5 * 2**20 + 4096])
def test_the_lowered_kernels_declare_the_plans_bytes_and_get_the_vmem_limit(
    limit: int | None,
) -> None:
    q = jax.ShapeDtypeStruct((1, 1024, 4, 128), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((1, 1024, 2, 128), jnp.bfloat16)

    def grads(q: jax.Array, k: jax.Array, v: jax.Array) -> tuple:
        def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
            return flash_attention(q, k, v, is_causal=True, device_kind=V5E, vmem_limit_bytes=limit)

        out, vjp = jax.vjp(attend, q, k, v)
        return vjp(out)

    # Lowering for TPU runs Mosaic's Python lowering only: no libtpu, no compile.
    text = jax.jit(grads).trace(q, kv, kv).lower(lowering_platforms=("tpu",)).as_text()
    configs = _kernel_configs(text)
    assert set(configs) == {f"zoo_flash_tpu_{k}" for k in ("forward", "backward_delta",
                                                           "backward_dq", "backward_dkdv")}  # fmt: skip
    plan = plan_call(q, kv, device_kind=V5E, is_causal=True)
    expected = limit or plan.vmem_limit_bytes
    for config in configs.values():
        (scoped,) = config["scoped_memory_configs"]
        assert scoped["size"] == expected
    cost = configs["zoo_flash_tpu_forward"]["custom_call_config"]["cost_estimate"]
    assert cost["bytes_accessed"] == plan.forward_bytes


def test_a_bad_vmem_limit_is_refused_by_name() -> None:
    q = jnp.zeros((1, 128, 2, 128), jnp.bfloat16)
    with pytest.raises(ValueError, match="vmem_limit_bytes must be a positive int"):
        flash_attention(q, q, q, device_kind=V5E, vmem_limit_bytes=0)
