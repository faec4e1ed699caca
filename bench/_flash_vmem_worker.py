"""Worker of the ``flash_vmem`` benchmark: bisects the VMEM limit Mosaic accepts (compile-only).

Runs in the TPU environment (``.venv-tpu``, which has libtpu):
``python -m bench._flash_vmem_worker '{"chip": "v5e", "shape": [1, 8192, 16, 128]}'``. Each
``measure`` request compiles the installed ``zoo_flash_tpu``'s own ``custom_vjp`` (forward, or
forward and backward) for one device of a libtpu compile-only topology with the given blocks
and ``FlashConfig.vmem_limit_bytes`` set by hand, at limits chosen by
``_flash_vmem.smallest_accepted``. A compile refused for scoped VMEM is a "no"; any other
compile error ends the request and becomes the cell's error text.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp

from ._flash_vmem import smallest_accepted
from ._worker import guarded, serve

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

        self.device = topologies.get_topology_desc(TOPOLOGIES[chip], platform="tpu").devices[0]
        self.shape = shape

    def config(self, group: int, blocks: Any) -> Any:
        """The call's ``FlashConfig`` as the kernel builds it, with the given blocks."""
        from zoo_flash_tpu import _api

        b, t, n, h = self.shape
        q = jax.ShapeDtypeStruct((b, t, n, h), DTYPE)
        kv = jax.ShapeDtypeStruct((b, t, n // group, h), DTYPE)
        return _api.make_config(
            q, kv, scale=h**-0.5, is_causal=True, has_segments=False, local_window=None,
            logits_soft_cap=None, block_sizes=blocks, device_kind=self.device.device_kind,
        )  # fmt: skip

    def compile(self, cfg: Any, backward: bool, limit_bytes: int) -> float:
        """Seconds to trace, lower and compile the call at ``limit_bytes``; raises if refused."""
        from zoo_flash_tpu import _vjp

        cfg = dataclasses.replace(cfg, vmem_limit_bytes=limit_bytes)
        sharding = jax.sharding.SingleDeviceSharding(self.device)
        b, t, n, h = self.shape
        q = jax.ShapeDtypeStruct((b, t, n, h), DTYPE, sharding=sharding)
        kv = jax.ShapeDtypeStruct((b, t, cfg.num_kv_heads, h), DTYPE, sharding=sharding)

        def forward(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
            return _vjp.flash_attention_vjp(q, k, v, None, None, cfg)

        def grads(q: jax.Array, k: jax.Array, v: jax.Array, d_out: jax.Array) -> tuple:
            return jax.vjp(forward, q, k, v)[1](d_out)  # the cotangent is an input

        fn, args = (grads, (q, kv, kv, q)) if backward else (forward, (q, kv, kv))
        start = time.perf_counter()
        jax.jit(fn).lower(*args).compile()
        return time.perf_counter() - start


def estimate_bytes(cfg: Any, backward: bool) -> dict[str, int]:
    """The policy's VMEM estimates of the call's blocks (the larger one governs a fwd+bwd)."""
    from zoo_flash_tpu._policy import backward_vmem_bytes, forward_vmem_bytes

    blocks, h = cfg.blocks, cfg.head_dim_padded
    out = {
        "forward": forward_vmem_bytes(
            blocks.block_q, blocks.block_kv, h, cfg.itemsize, cfg.heads_per_step,
            blocks.block_kv_compute,
        )
    }  # fmt: skip
    if backward:
        out["backward"] = backward_vmem_bytes(
            blocks.block_q_bwd, blocks.block_kv_bwd, h, cfg.itemsize, cfg.heads_per_step,
            blocks.block_kv_bwd_compute,
        )  # fmt: skip
    return out


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
    from zoo_flash_tpu._policy import BlockSizes

    bq, bk, bqb, bkb = blocks
    cfg = compiler.config(group, BlockSizes(bq, bk, bqb, bkb, compute, compute))
    policy_mib = generation.vmem_limit_bytes // MiB
    seconds: dict[int, float] = {}
    refusals: dict[int, str] = {}

    def accepts(mib: int) -> bool:
        try:
            seconds[mib] = compiler.compile(cfg, backward, mib * MiB)
        except Exception as err:
            if not is_vmem_refusal(str(err)):
                raise
            refusals[mib] = str(err)
            return False
        return True

    top = generation.vmem_bytes // MiB
    found, tried = smallest_accepted(accepts, start=min(policy_mib, top), top=top)
    estimates = estimate_bytes(cfg, backward)
    below = refusals.get(found - 1) if found else None
    return {
        "min_mib": found,
        "top_mib": top,
        "tried_mib": tried,
        "refused_below_by": refused_by(below) if below else None,
        "estimate_bytes": max(estimates.values()),
        "estimates_bytes": estimates,
        "heads_per_step": cfg.heads_per_step,
        "policy_limit_mib": policy_mib,
        "compile_s": round(seconds[policy_mib], 2) if policy_mib in seconds else None,
    }


def main() -> None:
    import zoo_flash_tpu
    from zoo_flash_tpu._policy import generation_for

    config = json.loads(sys.argv[1])
    compiler = Compiler(config["chip"], tuple(config["shape"]))
    kind = compiler.device.device_kind
    generation = generation_for(kind)
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
        cfg = compiler.config(1, None)
        return {"compile_s": compiler.compile(cfg, False, generation.vmem_limit_bytes)}

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
