"""The parts of ``zoo kernels`` that load JAX and the kernels: ``--here`` (where each kernel
serves, attention, grouped-matmul and cross-entropy kernels alike) and ``verify NAME`` (the kernel's
conformance suite on this machine)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import zoo_attention
import zoo_attention.cross_entropy.testing
import zoo_attention.grouped.testing
import zoo_attention.linear.testing
import zoo_attention.testing
from zoo_attention import cross_entropy, grouped, linear

from .._jax_range import (
    ATTENTION,
    CROSS_ENTROPY,
    GROUPED_MATMUL,
    LINEAR_ATTENTION,
    Kind,
    describe_running_jax,
    verified_jax,
    warn_outside_verified_range,
)
from .._usage import UsageError

PLATFORMS = ("cpu", "gpu", "tpu")
#: TPU kernels that serve off a TPU in Pallas interpret mode when their variable is 1.
INTERPRET_VARS = {
    "flash_tpu": "ZOO_FLASH_TPU_INTERPRET",
    "megablox": "ZOO_MEGABLOX_INTERPRET",
    "deltanet_tpu": "ZOO_DELTANET_TPU_INTERPRET",
}


def _attention_probe() -> Any:
    """A typical training call on this machine, used to ask each kernel whether it serves here."""
    q = jax.ShapeDtypeStruct((1, 1024, 8, 128), jnp.bfloat16)
    spec, _ = zoo_attention.make_spec(q, q, q, is_causal=True)
    return spec


def _grouped_probe() -> Any:
    """A typical mixture-of-experts grouped matmul: 4096 routed rows, 8 experts, bfloat16."""
    lhs = jax.ShapeDtypeStruct((4096, 1024), jnp.bfloat16)
    rhs = jax.ShapeDtypeStruct((8, 1024, 2048), jnp.bfloat16)
    return grouped.make_spec(lhs, rhs, jax.ShapeDtypeStruct((8,), jnp.int32))


def _cross_entropy_probe() -> Any:
    """A typical language-model loss: 8,192 bfloat16 hidden states of 2,048 against a tied
    head of Llama 3's 128,256 tokens, masked."""
    hidden = jax.ShapeDtypeStruct((4, 2048, 2048), jnp.bfloat16)
    head = jax.ShapeDtypeStruct((128256, 2048), jnp.bfloat16)
    ids = jax.ShapeDtypeStruct((4, 2048), jnp.int32)
    return cross_entropy.make_spec(hidden, head, ids, ids, head_layout="vd")


def _linear_probe() -> Any:
    """A Qwen3.5-9B gated DeltaNet layer's recurrence at 4,096 tokens, bfloat16."""
    qk = jax.ShapeDtypeStruct((1, 4096, 16, 128), jnp.bfloat16)
    v = jax.ShapeDtypeStruct((1, 4096, 32, 128), jnp.bfloat16)
    g = jax.ShapeDtypeStruct((1, 4096, 32), jnp.float32)
    return linear.make_spec(qk, qk, v, g, g, normalize_qk=True)[0]


@dataclasses.dataclass(frozen=True)
class _Registry:
    """What ``zoo kernels`` needs of the kernels of one kind."""

    kind: Kind
    kernels: Callable[[], dict[str, Any]]
    refused: Callable[[], list[Any]]
    probe: Callable[[], Any]
    verify: Callable[..., tuple[list[dict[str, str]], int]]
    verify_count: Callable[[], int]


REGISTRIES = (
    _Registry(
        ATTENTION,
        zoo_attention.kernels,
        zoo_attention.refused_kernels,
        _attention_probe,
        zoo_attention.testing.verify,
        zoo_attention.testing.verify_count,
    ),
    _Registry(
        GROUPED_MATMUL,
        grouped.kernels,
        grouped.refused_kernels,
        _grouped_probe,
        zoo_attention.grouped.testing.verify,
        zoo_attention.grouped.testing.verify_count,
    ),
    _Registry(
        CROSS_ENTROPY,
        cross_entropy.kernels,
        cross_entropy.refused_kernels,
        _cross_entropy_probe,
        zoo_attention.cross_entropy.testing.verify,
        zoo_attention.cross_entropy.testing.verify_count,
    ),
    _Registry(
        LINEAR_ATTENTION,
        linear.kernels,
        linear.refused_kernels,
        _linear_probe,
        zoo_attention.linear.testing.verify,
        zoo_attention.linear.testing.verify_count,
    ),
)


def serves_on(kernel: Any, spec: Any) -> str:
    """The platforms whose probe call ``kernel`` accepts when named (its ``check``), whether or
    not their default order picks it unnamed. Another platform is asked without this machine's
    device kind: a TPU kernel asked about a ``'cpu'`` TPU would warn it has no row for it."""
    return ",".join(
        p
        for p in PLATFORMS
        if kernel.check(
            spec if p == spec.platform else dataclasses.replace(spec, platform=p, device_kind=None)
        )
        is None
    )


def _rows(registry: _Registry) -> list[dict[str, str]]:
    spec, kind = registry.probe(), registry.kind
    rows = []
    for name, kernel in sorted(registry.kernels().items()):
        reason = kernel.check(spec)
        rows.append(
            {
                "name": name,
                "kind": kind.name,
                "version": kernel.version,
                "contract": kernel.contract_version,
                "verified on jax": verified_jax(name, kind) or "-",
                "serves on": serves_on(kernel, spec) or "-",
                "default on": "fallback" if name == kind.reference else ",".join(kernel.platforms),
                "serves here": "yes" if reason is None else f"no: {reason}",
            }
        )
    for refused in registry.refused():
        empty = dict.fromkeys(("contract", "verified on jax", "serves on", "default on"), "")
        rows.append({"name": refused.name, "kind": kind.name, "version": refused.version,
                     **empty, "serves here": f"refused: {refused.reason}"})  # fmt: skip
    return rows


def here_rows() -> list[dict[str, str]]:
    """One row per registered kernel of each kind (refused ones included): kind, version,
    contract, verified JAX, where it serves when named, where the default order picks it
    (``xla``, ``ragged_dot`` and ``logits`` are every platform's fallback) and whether it serves here, or
    why not. Prints the backend first."""
    print(f"backend: {jax.default_backend()}")
    return [row for registry in REGISTRIES for row in _rows(registry)]


def _registry_of(name: str) -> _Registry:
    for registry in REGISTRIES:
        if name in registry.kernels():
            return registry
    installed = ", ".join(sorted(n for r in REGISTRIES for n in r.kernels()))
    raise UsageError(f"Unknown kernel {name!r}; installed: {installed}.")


def run_verify(name: str) -> int:
    """``zoo kernels verify NAME``: every conformance case of the kernel's kind, a line each as
    it finishes."""
    registry = _registry_of(name)
    var = INTERPRET_VARS.get(name)
    if var is not None and jax.default_backend() != "tpu":
        # No TPU here: run the real kernel in Pallas TPU interpret mode.
        os.environ[var] = "1"
        print(f"zoo: no TPU here; running {name} in interpret mode", file=sys.stderr)
    kernel = registry.kernels()[name]
    count = registry.verify_count()
    interpret = var is not None and jax.default_backend() != "tpu"
    # Measured on a 2-core CPU: a few seconds a check natively; in interpret mode flash_tpu's
    # 31 checks took 191 s of CPU (10 minutes of wall clock on a machine at load average 16).
    each = 6 if interpret else 2
    warn_outside_verified_range(kernel.name, kernel.version, registry.kind)
    print(
        f"verifying {kernel.name} {kernel.version} on {jax.default_backend()} "
        f"({describe_running_jax()}): {count} checks, "
        f"about {_duration(count * each)}{' in interpret mode' if interpret else ''}; each "
        "is printed as it finishes",
        file=sys.stderr,
        flush=True,
    )
    done: list[dict[str, str]] = []

    def show(row: dict[str, str]) -> None:
        done.append(row)
        seconds = f"{row['seconds']:>6} s" if row["seconds"] else " " * 8
        detail = f"  {row['detail']}" if row["detail"] else ""
        index = f"{len(done):>{len(str(count))}}/{count}"
        print(f"{index} {row['result']:<4} {seconds}  {row['case']}{detail}", flush=True)

    try:
        rows, failed = registry.verify(name, on_row=show)
    except Exception as err:  # a kernel that crashes the suite itself has failed it
        print(f"zoo: verifying {name} failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} minutes" if seconds >= 120 else f"{seconds:.0f} seconds"
