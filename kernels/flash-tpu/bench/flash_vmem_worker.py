"""Worker of the ``flash_vmem`` benchmark: bisects the VMEM limit Mosaic accepts (compile-only).

Runs in the TPU environment (``.venv-tpu``, which has libtpu):
``python -m flash_vmem_worker '{"chip": "v5e", "shape": [1, 8192, 16, 128]}'``. Each
``measure`` request compiles the installed ``zoo_flash_tpu.flash_attention`` (forward, or
forward and backward) for one device of a libtpu compile-only topology with the given blocks
and ``vmem_limit_bytes``, at limits chosen by ``flash_vmem.smallest_accepted``. A compile refused for scoped VMEM is a "no"; any other
compile error ends the request and becomes the cell's error text.
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp

import zoo_flash_tpu
from bench.harness import guarded, serve
from flash_vmem import smallest_accepted

#: Compile-only topology per chip; its first device is the target.
TOPOLOGIES = {"v5e": "v5e:2x2", "v6e": "v6e:2x2", "v5p": "v5p:2x2x1", "v4": "v4:2x2x1"}
MiB = 2**20
DTYPE = jnp.bfloat16


def is_vmem_refusal(message: str) -> bool:
    """Whether a compile error is XLA/Mosaic refusing the scoped VMEM limit (E1001,
    ``CompileTimeScopedVmemOom``), as opposed to any other failure."""
    return "CompileTimeScopedVmemOom" in message or (
        "RESOURCE_EXHAUSTED" in message and "vmem" in message.lower()
    )


def refused_by(message: str) -> str | None:
    """The kernel a VMEM refusal names (``forward``, ``backward_dq``, ...), else its op name."""
    found = re.search(r"zoo_flash_tpu_(forward|backward_delta|backward_dq|backward_dkdv)", message)
    if found:
        return found.group(1)
    op = re.search(r"allocating on stack for %(\S+)", message)
    return op.group(1) if op else None


class Compiler:
    """Compiles one cell's call at a given VMEM limit on one compile-only device."""

    def __init__(self, chip: str, shape: tuple[int, int, int, int]):
        from jax.experimental import topologies

        topology = topologies.get_topology_desc(TOPOLOGIES[chip], platform="tpu")
        self.device: jax.Device = topology.devices[0]
        self.shape = shape

    def specs(self, group: int) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
        """Query and key/value shapes of the cell, on the compile-only device."""
        sharding = jax.sharding.SingleDeviceSharding(self.device)
        b, t, n, h = self.shape
        q = jax.ShapeDtypeStruct((b, t, n, h), DTYPE, sharding=sharding)
        return q, jax.ShapeDtypeStruct((b, t, n // group, h), DTYPE, sharding=sharding)

    def compile(self, group: int, blocks: Any, backward: bool, limit_bytes: int) -> float:
        """Seconds to trace, lower and compile the call at ``limit_bytes``; raises if refused."""
        q, kv = self.specs(group)

        def forward(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
            return zoo_flash_tpu.flash_attention(
                q, k, v, is_causal=True, block_sizes=blocks,
                device_kind=self.device.device_kind, vmem_limit_bytes=limit_bytes,
            )  # fmt: skip

        def grads(q: jax.Array, k: jax.Array, v: jax.Array, d_out: jax.Array) -> tuple:
            return jax.vjp(forward, q, k, v)[1](d_out)  # the cotangent is an input

        fn, args = (grads, (q, kv, kv, q)) if backward else (forward, (q, kv, kv))
        start = time.perf_counter()
        jax.jit(fn).lower(*args).compile()
        return time.perf_counter() - start


def measure(
    compiler: Compiler,
    generation: Any,
    group: int,
    backward: bool,
    blocks: list[int],
    compute: int | None,
) -> dict[str, Any]:
    """Bisect one cell: the smallest limit (MiB) accepted, the policy's estimate, and what
    refused the limit 1 MiB below."""
    block_q, block_kv, block_q_bwd, block_kv_bwd = blocks  # the four DMA blocks
    sizes = zoo_flash_tpu.BlockSizes(block_q, block_kv, block_q_bwd, block_kv_bwd, compute, compute)
    policy_mib = generation.vmem_limit_bytes // MiB
    seconds: dict[int, float] = {}
    refusals: dict[int, str] = {}

    def accepts(mib: int) -> bool:
        try:
            seconds[mib] = compiler.compile(group, sizes, backward, mib * MiB)
        except Exception as err:
            if not is_vmem_refusal(str(err)):
                raise
            refusals[mib] = str(err)
            return False
        return True

    top = generation.vmem_bytes // MiB
    found, tried = smallest_accepted(accepts, start=min(policy_mib, top), top=top)
    plan = zoo_flash_tpu.plan_call(
        *compiler.specs(group), device_kind=compiler.device.device_kind, is_causal=True,
        block_sizes=sizes,
    )  # fmt: skip
    # The policy's estimates of the call's blocks (the larger one governs a fwd+bwd).
    estimates = {"forward": plan.forward_vmem_bytes}
    if backward:
        estimates["backward"] = plan.backward_vmem_bytes
    below = refusals.get(found - 1) if found else None
    return {
        "min_mib": found,
        "top_mib": top,
        "tried_mib": tried,
        "refused_below_by": refused_by(below) if below else None,
        "estimate_bytes": max(estimates.values()),
        "estimates_bytes": estimates,
        "heads_per_step": plan.heads_per_step,
        "policy_limit_mib": policy_mib,
        "compile_s": round(seconds[policy_mib], 2) if policy_mib in seconds else None,
    }


def main() -> None:
    config = json.loads(sys.argv[1])
    compiler = Compiler(config["chip"], tuple(config["shape"]))
    kind = compiler.device.device_kind
    generation = zoo_flash_tpu.generation_for(kind)
    hello = {
        "version": zoo_flash_tpu.__version__,
        "module": zoo_flash_tpu.__file__,
        "topology": TOPOLOGIES[config["chip"]],
        "device_kind": kind,
        "vmem_mib": generation.vmem_bytes // MiB,
        "policy_limit_mib": generation.vmem_limit_bytes / MiB,
        "budget_fraction": generation.budget_bytes / generation.vmem_limit_bytes,
    }

    def warm_up() -> dict[str, Any]:  # libtpu's start-up is not in the first cell's seconds
        return {"compile_s": compiler.compile(1, None, False, generation.vmem_limit_bytes)}

    hello["warm_up"] = guarded(warm_up)
    handlers = {
        "measure": lambda r: guarded(
            measure, compiler=compiler, generation=generation, group=r["group"],
            backward=r["backward"], blocks=r["blocks"], compute=r["compute"],
        ),
    }  # fmt: skip
    serve(handlers, hello)


if __name__ == "__main__":
    main()
