"""flash_tpu 0.1.x against 0.2.0 and later: modelled HBM traffic of one forward, no compile.

The model is the kernel's own: each grid step that does work fetches one key and one value
block (steps past a query block's range re-use the block in VMEM), each query-side block once;
bytes as in ``zoo_flash_tpu._cost`` (``kv_visit_bytes``, ``forward_cost``). 0.1.x is the same
kernel with one query head per grid step and blocks planned for one head (``heads_per_step=1``),
which is exactly its grid; 0.2.0 and later take a GQA group's heads per step (the figures
under the key ``"0.2.0"`` are the installed version's own configuration). Compute sub-blocks
(``BlockSizes.block_kv_compute``) split a loaded key block for compute only: they change
neither the loaded blocks nor the grid, so not these figures. Shapes: B=2, N=16, H=128,
causal, bfloat16, each chip's own block-size policy.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._results import new_result, table, target

NAME = "flash_traffic"
TITLE = "flash_tpu 0.1.x vs 0.2.0 and later: modelled HBM traffic per forward (no TPU)"
MiB = 2**20


def _configs(kind: str, t: int, group: int) -> tuple[Any, Any]:
    """(0.1.x, 0.2.0 and later) configurations of one forward call: the installed version's,
    and the same with 0.1.x's one head per step and its blocks for one head."""
    import jax
    import jax.numpy as jnp

    from zoo_flash_tpu._api import make_config
    from zoo_flash_tpu._policy import choose_block_sizes, generation_for

    q = jax.ShapeDtypeStruct((2, t, 16, 128), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((2, t, 16 // group, 128), jnp.bfloat16)
    new = make_config(
        q, kv, scale=128**-0.5, is_causal=True, has_segments=False, local_window=None,
        logits_soft_cap=None, device_kind=kind,
    )  # fmt: skip
    old_blocks = choose_block_sizes(
        generation_for(kind), q_len=t, kv_len=t, head_dim=128, itemsize=2, heads=1
    )
    return dataclasses.replace(new, heads_per_step=1, blocks=old_blocks), new


def figures(kind: str, t: int, group: int) -> dict[str, dict[str, float]]:
    """K/V MiB, total MiB and working grid steps of one forward, for 0.1.x and for 0.2.0 and
    later (key ``"0.2.0"``)."""
    from zoo_flash_tpu._cost import forward_cost, forward_kv_bytes
    from zoo_flash_tpu._mask_info import visited_blocks

    out = {}
    for label, cfg in zip(("0.1.x", "0.2.0"), _configs(kind, t, group), strict=True):
        pairs = visited_blocks(cfg, cfg.blocks.block_q, cfg.blocks.block_kv)
        out[label] = {
            "kv_mib": forward_kv_bytes(cfg) / MiB,
            "total_mib": forward_cost(cfg).bytes_accessed / MiB,
            "steps": pairs * cfg.batch * cfg.head_steps,
            "heads_per_step": cfg.heads_per_step,
            "blocks": f"{cfg.blocks.block_q}x{cfg.blocks.block_kv}",
        }
    return out


def run(quick: bool) -> dict[str, Any]:
    """The modelled table (seconds: no compile)."""
    chips = {"v5e": "TPU v5 lite", "v6e": "TPU v6 lite"}
    lengths = [8192] if quick else [8192, 32768]
    result = new_result(NAME, TITLE, quick)
    rows, data = [], []
    for chip, kind in chips.items():
        for t in lengths:
            for group in (1, 4, 8):
                f = figures(kind, t, group)
                old, new = f["0.1.x"], f["0.2.0"]
                data.append({"chip": chip, "seq_len": t, "group": group, **f})
                rows.append(
                    [
                        chip,
                        str(t),
                        str(group),
                        f"{new['heads_per_step']} / {new['blocks']}",
                        f"{old['kv_mib']:,.0f} → {new['kv_mib']:,.0f}",
                        f"{old['total_mib']:,.0f} → {new['total_mib']:,.0f}",
                        f"{old['steps']:,} → {new['steps']:,}",
                    ]
                )
    result["data"] = {"rows": data}
    result["tables"].append(
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
                "per head step; the log-sum-exp row written once (zoo_flash_tpu._cost). "
                "B=2, N=16, H=128, causal, bfloat16.",
                "0.2.0 and later: the installed version's cost model and blocks; its compute "
                "sub-blocks change neither the loaded blocks nor the grid. Each release's own "
                "code gives the same figures (checked in the flash_versus table).",
                "JAX's splash attention, beside 0.1.1, 0.2.0 and the installed version: the "
                "flash_versus table.",
            ],
        )
    )
    ref = next(d for d in data if (d["chip"], d["seq_len"], d["group"]) == ("v5e", 8192, 4))
    ratio = ref["0.1.x"]["kv_mib"] / ref["0.2.0"]["kv_mib"]
    result["targets"].append(
        target(
            "GQA G=4 (v5e, T=8192): K/V traffic per forward cut about 4×",
            f"{ref['0.1.x']['kv_mib']:,.0f} → {ref['0.2.0']['kv_mib']:,.0f} MiB ({ratio:.1f}×)",
            ratio >= 3.5,
        )
    )
    return result
