"""Ahead-of-time compilation for TPU generations from any host (libtpu's compile-only devices).

Used by the benchmark's compile-only mode and by the compile tests: it builds a 2x2
(batch x heads) mesh of compile-only devices of one generation (or a mesh of one device), lowers
``zoo_attention.dot_product_attention(..., implementation="flash_tpu")`` (forward, or forward
and backward) under that mesh on sharded ``ShapeDtypeStruct``s, and compiles it with the real
Mosaic compiler, then reports what the compiled module says about memory and cost. It goes
through the public contract, as a model does: the contract learns the TPU target from the mesh
and runs the kernel under ``shard_map`` over the batch and head axes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import zoo_attention

#: Compile-only topology per generation (each has at least four devices for a 2x2 mesh).
TOPOLOGIES: dict[str, str] = {
    "v4": "v4:2x2x1",
    "v5e": "v5e:2x2",
    "v5p": "v5p:2x2x1",
    "v6e": "v6e:2x2",
}

KERNEL_NAMES = (
    "zoo_flash_tpu_forward",
    "zoo_flash_tpu_backward_delta",
    "zoo_flash_tpu_backward_dq",
    "zoo_flash_tpu_backward_dkdv",
)


@dataclasses.dataclass(frozen=True)
class CompileCase:
    """One ahead-of-time compile: shapes (global, before sharding) and features."""

    generation: str
    batch: int = 2
    seq_len: int = 8192
    num_heads: int = 16
    num_kv_heads: int = 4
    head_dim: int = 128
    dtype: str = "bfloat16"
    causal: bool = True
    segments: bool = False
    window: tuple[int, int] | None = None
    soft_cap: float | None = None
    backward: bool = False
    devices: int = 4

    @property
    def label(self) -> str:
        """Short name for tables."""
        parts = [self.generation, f"H={self.head_dim}", f"T={self.seq_len}"]
        if self.segments:
            parts.append("segments")
        if self.window is not None:
            parts.append(f"window={self.window}")
        if self.soft_cap is not None:
            parts.append(f"cap={self.soft_cap:g}")
        if self.devices == 1:
            parts.append("1 device")
        parts.append("fwd+bwd" if self.backward else "fwd")
        return " ".join(parts)


def _mesh(generation: str, devices: int) -> Mesh:
    from jax.experimental import topologies

    topology = topologies.get_topology_desc(TOPOLOGIES[generation], platform="tpu")
    shape = (2, 2) if devices == 4 else (1, 1)
    grid = np.asarray(topology.devices[: shape[0] * shape[1]]).reshape(shape)
    return Mesh(grid, ("data", "model"))


def _flops(cost: Any) -> float:
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    return float(cost.get("flops", 0.0)) if cost else 0.0


def compile_case(case: CompileCase) -> dict[str, Any]:
    """Compile ``case`` and return its figures (all per device unless named ``global``).

    Keys: ``label``, ``generation``, ``device_kind``, ``compile_s``, ``temp_bytes``,
    ``argument_bytes``, ``output_bytes``, ``flops`` (XLA's cost model, which includes the
    kernels' ``CostEstimate``), ``mosaic_calls`` (``tpu_custom_call`` ops in the compiled HLO),
    ``kernels`` (our kernel names found in it), ``score_matrix_bytes_global``
    (``B·N·T²·4``, what a materialised float32 score matrix would take), ``devices``.
    """
    if case.devices not in (1, 4):
        raise ValueError(f"devices must be 1 or 4, got {case.devices}.")
    mesh = _mesh(case.generation, case.devices)
    dtype = jnp.dtype(case.dtype)
    b, t, n, k, h = case.batch, case.seq_len, case.num_heads, case.num_kv_heads, case.head_dim
    heads = NamedSharding(mesh, P("data", None, "model", None))
    q = jax.ShapeDtypeStruct((b, t, n, h), dtype, sharding=heads)
    kv = jax.ShapeDtypeStruct((b, t, k, h), dtype, sharding=heads)
    ids = jax.ShapeDtypeStruct((b, t), jnp.int32, sharding=NamedSharding(mesh, P("data", None)))

    def attend(q: jax.Array, k: jax.Array, v: jax.Array, seg: jax.Array) -> jax.Array:
        with zoo_attention.partition_axes(batch="data", heads="model"):
            return zoo_attention.dot_product_attention(
                q,
                k,
                v,
                is_causal=case.causal,
                segment_ids=(seg, seg) if case.segments else None,
                local_window_size=case.window,
                logits_soft_cap=case.soft_cap,
                implementation="flash_tpu",
            )

    def grads(
        q: jax.Array, k: jax.Array, v: jax.Array, seg: jax.Array, d_out: jax.Array
    ) -> tuple[jax.Array, ...]:
        # The cotangent is an input, as in training, so no harness temporary is counted.
        _, vjp = jax.vjp(lambda q, k, v: attend(q, k, v, seg), q, k, v)
        return vjp(d_out)

    start = time.perf_counter()
    # Four devices: under the mesh (the contract wraps the kernel in shard_map). One device: no
    # mesh context, only the inputs' shardings name the TPU target, and the kernel is called
    # directly (outside shard_map and outside any mesh).
    with jax.set_mesh(mesh) if case.devices > 1 else contextlib.nullcontext():
        if case.backward:
            lowered = jax.jit(grads).lower(q, kv, kv, ids, q)
        else:
            lowered = jax.jit(attend).lower(q, kv, kv, ids)
        lowered_text = lowered.as_text()
        compiled = lowered.compile()
    seconds = time.perf_counter() - start
    memory = compiled.memory_analysis()
    text = compiled.as_text()
    return {
        "label": case.label,
        "generation": case.generation,
        "device_kind": mesh.devices.flat[0].device_kind,
        "head_dim": h,
        "seq_len": t,
        "backward": case.backward,
        "segments": case.segments,
        "window": case.window,
        "soft_cap": case.soft_cap,
        "devices": int(mesh.devices.size),
        "shard_map": "shard_map" in lowered_text or "sdy.manual_computation" in lowered_text,
        "compile_s": round(seconds, 2),
        "temp_bytes": int(memory.temp_size_in_bytes),
        "argument_bytes": int(memory.argument_size_in_bytes),
        "output_bytes": int(memory.output_size_in_bytes),
        "flops": _flops(compiled.cost_analysis()),
        "mosaic_calls": len(re.findall(r"custom_call_target=\"tpu_custom_call\"", text)),
        "kernels": [name for name in KERNEL_NAMES if name in text],
        "score_matrix_bytes_global": b * n * t * t * 4,
    }
