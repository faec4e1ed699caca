"""The parts of ``zoo kernels`` that load JAX and the kernels: ``--here`` (where each kernel
serves) and ``verify NAME`` (the conformance suite on this machine)."""

from __future__ import annotations

import dataclasses
import os
import sys

import jax
import jax.numpy as jnp

import zoo_attention
import zoo_attention.testing

from .._jax_range import (
    REFERENCE,
    describe_running_jax,
    verified_jax,
    warn_outside_verified_range,
)
from .._usage import UsageError

PLATFORMS = ("cpu", "gpu", "tpu")


def _probe_spec() -> zoo_attention.AttentionSpec:
    """A typical training call on this machine, used to ask each kernel whether it serves here."""
    q = jax.ShapeDtypeStruct((1, 1024, 8, 128), jnp.bfloat16)
    spec, _ = zoo_attention.make_spec(q, q, q, is_causal=True)
    return spec


def serves_on(kernel: zoo_attention.AttentionKernel, spec: zoo_attention.AttentionSpec) -> str:
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


def here_rows() -> list[dict[str, str]]:
    """One row per registered kernel (refused ones included): version, contract, verified JAX,
    where it serves when named, where the default order picks it (``xla`` is every platform's
    fallback) and whether it serves here. Prints the backend first."""
    print(f"backend: {jax.default_backend()}")
    spec = _probe_spec()
    rows = []
    for name, kernel in sorted(zoo_attention.kernels().items()):
        reason = kernel.check(spec)
        rows.append(
            {
                "name": name,
                "version": kernel.version,
                "contract": kernel.contract_version,
                "verified on jax": verified_jax(name) or "-",
                "serves on": serves_on(kernel, spec) or "-",
                "default on": "fallback" if name == REFERENCE else ",".join(kernel.platforms),
                "serves here": "yes" if reason is None else f"no: {reason}",
            }
        )
    for refused in zoo_attention.refused_kernels():
        empty = dict.fromkeys(("contract", "verified on jax", "serves on", "default on"), "")
        rows.append({"name": refused.name, "version": refused.version, **empty,
                     "serves here": f"refused: {refused.reason}"})  # fmt: skip
    return rows


def run_verify(name: str) -> int:
    """``zoo kernels verify NAME``: every conformance case, a line each as it finishes."""
    if name not in zoo_attention.kernels():
        raise UsageError(
            f"Unknown kernel {name!r}; installed: {', '.join(sorted(zoo_attention.kernels()))}."
        )
    if name == "flash_tpu" and jax.default_backend() != "tpu":
        # No TPU here: run the real kernel in Pallas TPU interpret mode.
        os.environ["ZOO_FLASH_TPU_INTERPRET"] = "1"
        print("zoo: no TPU here; running flash_tpu in interpret mode", file=sys.stderr)
    kernel = zoo_attention.get_kernel(name)
    count = zoo_attention.testing.verify_count()
    interpret = os.environ.get("ZOO_FLASH_TPU_INTERPRET") == "1" and jax.default_backend() != "tpu"
    # Measured on a 2-core CPU: a few seconds a check natively, ~15 s in interpret mode.
    each = 15 if interpret else 2
    warn_outside_verified_range(kernel.name, kernel.version)
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
        rows, failed = zoo_attention.testing.verify(name, on_row=show)
    except Exception as err:  # a kernel that crashes the suite itself has failed it
        print(f"zoo: verifying {name} failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} minutes" if seconds >= 120 else f"{seconds:.0f} seconds"
