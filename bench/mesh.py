"""The train step on meshes of 8 fake CPU devices against one device, same global batch.

Fake CPU devices share this machine's cores, so the step times measure what partitioning
costs (the collectives and the per-shard overhead), not a speedup; the collectives table is the
point: counts of each collective XLA put in the compiled step. A plain FSDP step should hold
all-gathers (parameters before use) and reductions (gradients), and no all-to-all.
"""

from __future__ import annotations

from typing import Any

from .harness import Worker, new_result, table, target

NAME = "mesh"
TITLE = "The train step on a mesh of 8 fake CPU devices"
EIGHT = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
ONE = {"XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
MESHES = ("data=1,fsdp=8,tensor=1", "data=8,fsdp=1,tensor=1", "data=2,fsdp=2,tensor=2",
          "data=1,fsdp=4,tensor=2")  # fmt: skip


def _setup(quick: bool) -> dict[str, Any]:
    model = {"vocab_size": 1024, "d_model": 256, "n_layers": 4, "n_heads": 8, "n_kv_heads": 4,
             "mlp_hidden": 1024, "max_position": 1024}  # fmt: skip
    if quick:
        model.update(d_model=128, n_layers=2, mlp_hidden=512)
    return {"model": model, "seq_len": 256, "batch": 16}


def run(quick: bool) -> dict[str, Any]:
    """One worker with 1 device (the baseline), one with 8 for every mesh."""
    setup = _setup(quick)
    steps = 3 if quick else 8
    with Worker("bench.mesh_worker", setup, env=ONE) as one:
        base = one.ask("measure", mesh="data=1,fsdp=1,tensor=1", steps=steps)
    rows_out = [base]
    meshes = MESHES[:2] if quick else MESHES
    with Worker("bench.mesh_worker", setup, env=EIGHT) as eight:
        rows_out += [eight.ask("measure", mesh=m, steps=steps) for m in meshes]
    result = new_result(NAME, TITLE, quick)
    result["data"] = {"setup": setup, "rows": rows_out}
    m = setup["model"]
    shape = (
        f"llama-tiny widened to d_model {m['d_model']}, {m['n_layers']} layers, "
        f"{m['n_heads']}/{m['n_kv_heads']} heads, MLP {m['mlp_hidden']}, vocab "
        f"{m['vocab_size']}; global batch {setup['batch']} x {setup['seq_len']} tokens; AdamW."
    )
    rows = []
    for r in rows_out:
        c = r["collectives"]
        rows.append(
            [
                r["mesh"],
                f"{r['step_s'] * 1e3:.0f}",
                f"{r['step_s'] / base['step_s']:.2f}x",
                f"{r['compile_s']:.1f}",
                f"{r['loss']:.6f}",
                str(c["all-gather"]),
                str(c["all-reduce"]),
                str(c["reduce-scatter"]),
                str(c["all-to-all"]),
                str(c["collective-permute"]),
                str(r["compilations"]),
            ]
        )
    result["tables"].append(
        table(
            "Train step by mesh: time against one device, and the collectives in the step",
            [
                "mesh",
                "step ms",
                "vs 1 device",
                "compile s",
                "loss",
                "all-gather",
                "all-reduce",
                "reduce-scatter",
                "all-to-all",
                "coll.-permute",
                "compiles",
            ],
            rows,
            [
                shape,
                "Fake devices share the machine's cores: the time ratio is partitioning "
                "overhead, not a speedup. XLA:CPU combines collectives into tuple ops, so a "
                "count is of instructions, not of arrays.",
            ],
        )
    )
    fsdp = rows_out[1]
    result["targets"].append(
        target(
            "no all-to-all in a plain FSDP step (8 devices)",
            f"{fsdp['collectives']['all-to-all']} all-to-all",
            fsdp["collectives"]["all-to-all"] == 0,
        )
    )
    worst = max(abs(r["loss"] - base["loss"]) / abs(base["loss"]) for r in rows_out[1:])
    result["targets"].append(
        target("same loss on every mesh (float32)", f"worst relative gap {worst:.1e}", worst < 1e-5)
    )
    return result
