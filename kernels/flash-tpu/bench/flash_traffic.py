"""flash_tpu 0.1.x against 0.2.0 and later: modelled HBM traffic of one forward, no compile.

The model is the kernel's own (``zoo_flash_tpu.plan_call``): each grid step that does work
fetches one key and one value block (steps past a query block's range re-use the block in
VMEM), each query-side block once. 0.1.x is the same kernel with one query head per grid step
and blocks planned for one head (``heads_per_step=1``), which is exactly its grid; 0.2.0 and
later take a GQA group's heads per step (the figures under the key ``"0.2.0"`` are the
installed version's own plan). Compute sub-blocks (``BlockSizes.block_kv_compute``) split a
loaded key block for compute only: they change neither the loaded blocks nor the grid, so not
these figures. Shapes: B=2, N=16, H=128, causal, bfloat16, each chip's own block-size policy.
"""

from __future__ import annotations

from typing import Any

from bench.harness import new_result, table, target

NAME = "flash_traffic"
TITLE = "flash_tpu 0.1.x vs 0.2.0 and later: modelled HBM traffic per forward (no TPU)"
MiB = 2**20
CHIPS = {"v5e": "TPU v5 lite", "v6e": "TPU v6 lite"}


def figures(kind: str, t: int, group: int) -> dict[str, dict[str, Any]]:
    """K/V MiB, total MiB and working grid steps of one forward, for 0.1.x (one query head per
    step) and for 0.2.0 and later (key ``"0.2.0"``, the installed version's plan)."""
    import jax
    import jax.numpy as jnp

    from zoo_flash_tpu import plan_call

    q = jax.ShapeDtypeStruct((2, t, 16, 128), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((2, t, 16 // group, 128), jnp.bfloat16)
    out = {}
    for label, heads in (("0.1.x", 1), ("0.2.0", None)):
        plan = plan_call(q, kv, device_kind=kind, is_causal=True, heads_per_step=heads)
        out[label] = {
            "kv_mib": plan.forward_kv_bytes / MiB,
            "total_mib": plan.forward_bytes / MiB,
            "steps": plan.forward_steps,
            "heads_per_step": plan.heads_per_step,
            "blocks": f"{plan.blocks.block_q}x{plan.blocks.block_kv}",
        }
    return out


def run(quick: bool) -> dict[str, Any]:
    """The modelled table (seconds: no compile)."""
    result = new_result(NAME, TITLE, quick)
    result["data"] = {
        "rows": [
            {"chip": chip, "seq_len": t, "group": g, **figures(kind, t, g)}
            for chip, kind in CHIPS.items()
            for t in ([8192] if quick else [8192, 32768])
            for g in (1, 4, 8)
        ]
    }
    return report(result)


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The table and the GQA target, from the stored figures."""
    rows = []
    for d in result["data"]["rows"]:
        old, new = d["0.1.x"], d["0.2.0"]
        rows.append([
            d["chip"], str(d["seq_len"]), str(d["group"]),
            f"{new['heads_per_step']} / {new['blocks']}",
            f"{old['kv_mib']:,.0f} → {new['kv_mib']:,.0f}",
            f"{old['total_mib']:,.0f} → {new['total_mib']:,.0f}",
            f"{old['steps']:,} → {new['steps']:,}",
        ])  # fmt: skip
    result["tables"] = [
        table(
            "Modelled per forward (not measured): 0.1.x → 0.2.0 and later",
            [
                "chip",
                "T",
                "G",
                "0.2.0+ heads/step, blocks",
                "K/V MiB",
                "total MiB",
                "grid steps that work",
            ],
            rows,
            [
                "Model: every working grid step fetches one k and one v block; query blocks once "
                "per head step; the log-sum-exp row written once (zoo_flash_tpu.plan_call: the "
                "bytes the forward kernel's CostEstimate declares). B=2, N=16, H=128, causal, "
                "bfloat16.",
                "0.1.x: the installed version's plan with one query head per grid step "
                "(heads_per_step=1, blocks planned for one head), 0.1.x's grid. 0.2.0 and later: "
                "the installed version's plan; its compute sub-blocks change neither the loaded "
                "blocks nor the grid.",
                "JAX's splash attention, beside 0.1.1, 0.2.0 and the installed version: the "
                "flash_versus table.",
            ],
        )
    ]
    ref = next(
        d
        for d in result["data"]["rows"]
        if (d["chip"], d["seq_len"], d["group"]) == ("v5e", 8192, 4)
    )
    old, new = ref["0.1.x"]["kv_mib"], ref["0.2.0"]["kv_mib"]
    result["targets"] = [
        target(
            "GQA G=4 (v5e, T=8192): K/V traffic per forward cut about 4×",
            f"{old:,.0f} → {new:,.0f} MiB ({old / new:.1f}×)",
            old / new >= 3.5,
        )
    ]
    return result
