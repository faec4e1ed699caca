"""The smallest scoped VMEM limit Mosaic accepts for flash_tpu, per block choice (compile-only).

For each block choice the installed ``zoo_flash_tpu`` is compiled for one device of a libtpu
compile-only topology (v5e) with ``flash_attention(..., vmem_limit_bytes=)`` set by hand, and the limit is
bisected to 1 MiB: the smallest at which Mosaic compiles the call (forward, or forward and
backward: every kernel of the call gets the same limit). Beside it the block-size policy's own
estimate of the working set (``zoo_flash_tpu.plan_call``: ``forward_vmem_bytes`` /
``backward_vmem_bytes``), which is what the policy fits to its VMEM budget. Each block choice
is compiled with whole-block compute and with 512-key compute sub-blocks
(``BlockSizes.block_kv_compute`` / ``block_kv_bwd_compute``). Nothing runs on a TPU: these are
Mosaic's own accept/refuse decisions, not measurements on a chip. The compiles run in one
worker process in the TPU environment (:mod:`flash_vmem_worker`).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time
from collections.abc import Callable
from typing import Any

from bench.harness import (
    ROOT,
    TPU_PYTHON,
    Worker,
    new_result,
    table,
    tpu_environment_missing,
    unavailable,
)
from flash_releases import installed_version

NAME = "flash_vmem"
TITLE = (
    f"flash_tpu {installed_version()}: smallest VMEM limit Mosaic accepts per block choice, "
    "with the policy's estimate (compile-only, v5e)"
)
HERE = pathlib.Path(__file__).resolve().parent
TOPOLOGY = "v5e:2x2"  # the compile-only topology of CHIP, as the worker builds it
CHIP = "v5e"
MiB = 2**20
#: Shapes of every cell: B, T, N, H (causal, bfloat16), as the kernel README's design notes.
SHAPE = (1, 8192, 16, 128)
SUB_BLOCK = 512  # keys per compute sub-block, forward and dQ
#: (block_q, block_kv, block_q_bwd, block_kv_bwd): the v5e table's blocks and a doubled one.
BLOCKS = ((512, 1024, 512, 1024), (1024, 2048, 1024, 1024))
#: libtpu's start-up looks for TPU workers; compile-only devices need none (as zoo compile and
#: the kernel's compile tests set it). Several processes may then load libtpu at once.
LIBTPU_ENV = {
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_ACCELERATOR_TYPE": "v5litepod-4",
    "TPU_SKIP_MDS_QUERY": "1",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}


@dataclasses.dataclass(frozen=True)
class Case:
    """One cell: GQA group, pass, blocks, and the compute sub-block (``None``: whole blocks)."""

    group: int
    backward: bool
    blocks: tuple[int, int, int, int]
    compute: int | None

    def request(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Sweep:
    groups: tuple[int, ...]
    passes: tuple[bool, ...]  # backward or not
    blocks: tuple[tuple[int, int, int, int], ...]
    budget_s: float  # compile seconds per run; cells left when it is spent are skipped and said

    def cases(self) -> list[Case]:
        return [
            Case(g, bwd, blocks, compute)
            for g in self.groups
            for bwd in self.passes
            for blocks in self.blocks
            for compute in (None, SUB_BLOCK)
        ]


FULL = Sweep((1, 8), (False, True), BLOCKS, 1200.0)
# A 1024 x 2048 cell takes about 20 s (seven compiles of 3 s); quick runs keep the table's blocks.
QUICK = Sweep((1, 8), (False,), BLOCKS[:1], 120.0)


def smallest_accepted(
    accepts: Callable[[int], bool], start: int, top: int
) -> tuple[int | None, list[int]]:
    """The smallest ``n`` in ``1..top`` with ``accepts(n)``, and the ``n`` tried, in order.

    ``accepts`` must be monotone (refused below some ``n``, accepted from it on). ``start``
    (the limit the policy passes, expected to be accepted) is tried first; when it is refused
    the search goes on above it, and ``None`` says that even ``top`` was refused. An error
    ``accepts`` raises (a refusal that is not about VMEM) propagates.
    """
    if not 1 <= start <= top:
        raise ValueError(f"start={start} must be within 1..top={top}")
    tried: list[int] = []

    def ask(n: int) -> bool:
        tried.append(n)
        return accepts(n)

    if ask(start):
        lo, hi = 1, start
    elif start == top or not ask(top):
        return None, tried
    else:
        lo, hi = start + 1, top
    while lo < hi:  # accepts(hi) is known; everything below lo is refused
        mid = (lo + hi) // 2
        if ask(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo, tried


def _row(d: dict[str, Any]) -> list[str]:
    """One cell's row from its stored request and reply."""
    bq, bk, bqb, bkb = d["blocks"]
    row = [str(d["group"]), "fwd+bwd" if d["backward"] else "fwd", f"{bq}×{bk}",
           f"{bqb}×{bkb}" if d["backward"] else "—",
           f"{d['compute']} keys" if d["compute"] else "whole block"]  # fmt: skip
    if "error" in d:
        return [*row, f"error: {d['error']}", "—", "—", "—", "—"]
    est, smallest, seconds = d["estimate_bytes"] / MiB, d["min_mib"], d.get("compile_s")
    refused = d.get("refused_below_by") or "—"
    return [
        *row,
        f"over {d['top_mib']} (refused at every limit)" if smallest is None else str(smallest),
        f"{est:,.1f}",
        "—" if smallest is None else f"{est / smallest:.2f}",
        refused.replace("backward_", "").replace("forward", "fwd"),
        "—" if seconds is None else f"{seconds:.1f}",
    ]


def run(quick: bool) -> dict[str, Any]:
    """The bisection over every cell; "unavailable" with the reason without libtpu."""
    if why := tpu_environment_missing():
        return unavailable(NAME, TITLE, quick, why)
    sweep = QUICK if quick else FULL
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    env |= {k: os.environ.get(k, v) for k, v in LIBTPU_ENV.items()}
    deadline = time.perf_counter() + sweep.budget_s
    rows: list[dict[str, Any]] = []
    worker = Worker("flash_vmem_worker", {"chip": CHIP, "shape": SHAPE}, env, str(TPU_PYTHON))
    try:
        hello = worker.hello
    except RuntimeError as err:  # libtpu or the kernel would not even load
        worker.close()
        return unavailable(NAME, TITLE, quick, str(err))
    died = None
    try:
        for case in sweep.cases():
            if died or time.perf_counter() > deadline:
                reply = {"error": died or "skipped: the run's compile budget was spent"}
            else:
                try:
                    reply = worker.ask("measure", **case.request())
                except RuntimeError as err:  # the worker died: this and later cells say so
                    died = str(err)
                    reply = {"error": died}
            rows.append({**case.request(), **reply})
    finally:
        worker.close()
    result = new_result(NAME, TITLE, quick)
    keys = ("device_kind", "version", "budget_fraction", "policy_limit_mib", "vmem_mib")
    result["data"] = {
        "chip": CHIP,
        **{k: hello[k] for k in keys},
        "shape": dict(zip(("batch", "seq_len", "heads", "head_dim"), SHAPE, strict=True)),
        "rows": rows,
    }
    return report(result)


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The table, from the stored cells."""
    data = result["data"]
    shape, kind = data["shape"], data["device_kind"]
    notes = [
        "Compile-only (Mosaic), not measured on a TPU: Mosaic's own accept/refuse decision for "
        f"one device of a libtpu {TOPOLOGY} compile-only topology ({kind}), zoo_flash_tpu "
        f"{data['version']}.",
        f"Shapes: B={shape['batch']}, T={shape['seq_len']:,}, N={shape['heads']} query heads, "
        f"K=N/G key/value heads, H={shape['head_dim']}, causal, bfloat16; the call is "
        "zoo_flash_tpu.flash_attention on a bare [B, T, N, H] input (forward, or jax.vjp of "
        "it: forward, dQ and dK/dV kernels), blocks given by hand.",
        "smallest limit: flash_attention's vmem_limit_bytes (the scoped VMEM limit every "
        "Mosaic kernel of the call gets) bisected to 1 MiB between 1 MiB and the chip's VMEM "
        f"({data['vmem_mib']} MiB), the policy's limit for the chip "
        f"({data['policy_limit_mib']:.0f} MiB) tried first: the call compiles at it and is "
        "refused for scoped VMEM (XLA error E1001, CompileTimeScopedVmemOom) 1 MiB below, "
        "where the kernel named in 'refused below by' ran out (fwd: forward; dq; dkdv). "
        "Acceptance is taken to be monotone in the limit. Compute: keys per compute sub-block "
        "of the forward and dQ kernels (BlockSizes.block_kv_compute, block_kv_bwd_compute); "
        "dK/dV always computes whole blocks.",
        "estimate: the policy's working-set estimate of the blocks (zoo_flash_tpu.plan_call's "
        "forward_vmem_bytes; with the backward, the larger of it and backward_vmem_bytes) with "
        "the heads per grid step the policy picks for the group; the policy accepts blocks "
        f"whose estimate is at most {data['budget_fraction']:.0%} of the limit it passes. "
        "estimate ÷ smallest above 1: the estimate is conservative (it asks for more than "
        "Mosaic needs).",
        "compile s: one compile at the policy's limit (trace, lower, compile; this 2-core "
        "host, under load).",
    ]
    result["tables"] = [
        table(
            "Smallest VMEM limit Mosaic accepts (MiB, compile-only) and the policy's estimate, "
            f"{kind}",
            [
                "G",
                "pass",
                "fwd blocks (q×kv)",
                "bwd blocks (q×kv)",
                "compute",
                "smallest limit MiB (Mosaic)",
                "estimate MiB (policy)",
                "estimate ÷ smallest",
                "refused below by",
                "compile s",
            ],
            [_row(d) for d in data["rows"]],
            notes,
        )
    ]
    return result
