"""splash compiled ahead of time for TPU generations, through libtpu's compile-only devices.

Usage: ``python splash_aot.py OUT.json SPEC [SPEC ...]`` in a python with libtpu and zoo-train
(``.venv-tpu``), a SPEC being ``GENERATION`` (each of its programs) or ``GENERATION:WHAT``
(one); ``test_splash_compile.py`` runs it. The programs of a generation:

- ``step`` (v5e, v5p, v6e): the train step of a small Llama with ``splash`` as its attention, compiled by
  ``zoo compile`` (the real step: forward, backward, optimizer update, donation) on a mesh of
  fsdp and tensor axes, so the contract runs splash under ``shard_map`` over both;
- ``features``: the attention call alone, forward and backward, with causal, packed segment
  ids, a window and a soft cap at once (GQA 8/2, bfloat16, head dim 128) on a 2x2 mesh;
- ``wide``: float32 heads of 256 on one device, the most VMEM the policy's blocks ask for.

The attention rows also say what ``zoo profile`` names each Mosaic call of the program by.

Writes ``{"rows": [...]}``; a compile that fails is a row with its ``error``. The environment
says the TPU is compile-only (``TPU_ACCELERATOR_TYPE``, ``TPU_WORKER_HOSTNAMES``,
``ALLOW_MULTIPLE_LIBTPU_LOAD``: see the test).
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
import sys
import tempfile
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import zoo_attention
from zoo_train.cli import main as zoo
from zoo_train.profile import parse_hlo

TOPOLOGIES = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}
# `zoo compile --topology v4:2x2x1` stops before compiling (libtpu lists 8 devices there, two a
# chip, and jax.make_mesh wants one a chip), so v4 gets the attention compiles alone.
STEP_GENERATIONS = ("v5e", "v5p", "v6e")
# llama-tiny with 128-wide heads (4 query, 2 key/value) and 256 tokens: heads split 2/1 over the
# tensor axis, the batch over fsdp.
STEP_ARGS = [
    "--model", "llama-tiny", "--seq-len", "256", "--batch-size", "8", "--mesh", "fsdp=-1,tensor=2",
    "--set", "model_config.d_model=512", "--set", "model_config.mlp_hidden=1024",
    "--set", "model_config.n_heads=4", "--attention-implementation", "splash",
]  # fmt: skip
KERNEL_NAMES = ("splash_mha_fwd", "splash_mha_dq", "splash_mha_dkv")


def step_row(generation: str) -> dict[str, Any]:
    """``zoo compile`` of the train step; its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "step.json"
        code = zoo(
            ["compile", "--topology", TOPOLOGIES[generation], *STEP_ARGS, "--json", str(out)]
        )
        report = json.loads(out.read_text()) if out.exists() else {}
    return {"generation": generation, "what": "step", "exit_code": code, **report}


def _mesh(generation: str, devices: int) -> Mesh:
    topology = topologies.get_topology_desc(TOPOLOGIES[generation], platform="tpu")
    side = 2 if devices == 4 else 1
    return Mesh(np.asarray(topology.devices[:devices]).reshape(side, side), ("data", "model"))


def attention_row(generation: str, what: str) -> dict[str, Any]:
    """Forward and backward of one contract call, compiled; which splash kernels it holds."""
    features = what == "features"
    b, t, n, k, h = (2, 2048, 8, 2, 128) if features else (1, 2048, 4, 4, 256)
    dtype = jnp.bfloat16 if features else jnp.float32
    mesh = _mesh(generation, 4 if features else 1)
    heads = NamedSharding(mesh, P("data", None, "model", None) if features else P())
    q = jax.ShapeDtypeStruct((b, t, n, h), dtype, sharding=heads)
    kv = jax.ShapeDtypeStruct((b, t, k, h), dtype, sharding=heads)
    ids = jax.ShapeDtypeStruct((b, t), jnp.int32, sharding=NamedSharding(mesh, P()))

    def loss(q: jax.Array, k: jax.Array, v: jax.Array, seg: jax.Array) -> jax.Array:
        with zoo_attention.partition_axes(batch="data", heads="model"):
            out = zoo_attention.dot_product_attention(
                q,
                k,
                v,
                is_causal=True,
                segment_ids=seg if features else None,
                local_window_size=(1024, 0) if features else None,
                logits_soft_cap=30.0 if features else None,
                implementation="splash",
            )
        return out.astype(jnp.float32).sum()

    with jax.set_mesh(mesh) if features else contextlib.nullcontext():
        lowered = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(q, kv, kv, ids)
        compiled = lowered.compile()
    text = compiled.as_text() or ""
    program = parse_hlo(text)
    return {
        "generation": generation,
        "what": what,
        "devices": int(mesh.devices.size),
        "shard_map": "sdy.manual_computation" in lowered.as_text()
        or "shard_map" in lowered.as_text(),
        "mosaic_calls": len(re.findall(r'custom_call_target="tpu_custom_call"', text)),
        "kernels": [name for name in KERNEL_NAMES if name in text],
        # What `zoo profile` names each Mosaic call by (the contract's scope in its op_name).
        "profiled_as": [
            program.kernel(name)
            for name, ins in program.instructions.items()
            if ins.target == "tpu_custom_call"
        ],
        "temp_bytes": int(compiled.memory_analysis().temp_size_in_bytes),
    }


def programs(generation: str) -> tuple[str, ...]:
    """What is compiled for ``generation``: the train step (not on v4), features and wide."""
    steps = ("step",) if generation in STEP_GENERATIONS else ()
    return (*steps, "features", "wide")


def main(argv: list[str]) -> int:
    """``OUT.json SPEC ...``: a SPEC is ``GENERATION`` (its every program) or
    ``GENERATION:WHAT`` (one of them)."""
    out, specs = pathlib.Path(argv[0]), argv[1:]
    rows = []
    for spec in specs:
        generation, _, one = spec.partition(":")
        for what in (one,) if one else programs(generation):
            try:
                row = step_row(generation) if what == "step" else attention_row(generation, what)
            except Exception as err:  # the first line of XLA's or Mosaic's reason is the finding
                first = (str(err).strip().splitlines() or [type(err).__name__])[0]
                row = {"generation": generation, "what": what, "error": first[:500]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    out.write_text(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
