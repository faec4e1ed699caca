"""The smallest scoped VMEM limit Mosaic accepts for flash_tpu, per block choice (compile-only).

For each block choice the installed ``zoo_flash_tpu`` is compiled for one device of a libtpu
compile-only topology (v5e) with ``FlashConfig.vmem_limit_bytes`` set by hand, and the limit is
bisected to 1 MiB: the smallest at which Mosaic compiles the call (forward, or forward and
backward: every kernel of the call gets the same limit). Beside it the block-size policy's own
estimate of the working set (``zoo_flash_tpu._policy.forward_vmem_bytes`` /
``backward_vmem_bytes``), which is what the policy fits to its VMEM budget. Each block choice
is compiled with whole-block compute and with 512-key compute sub-blocks
(``BlockSizes.block_kv_compute`` / ``block_kv_bwd_compute``). Nothing runs on a TPU: these are
Mosaic's own accept/refuse decisions, not measurements on a chip. The compiles run in one
worker process in the TPU environment (``_flash_vmem_worker``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

from ._release_site import ROOT, installed_version
from ._results import new_result, table, unavailable
from ._worker import Worker

NAME = "flash_vmem"
TITLE = (
    f"flash_tpu {installed_version()}: smallest VMEM limit Mosaic accepts per block choice, "
    "with the policy's estimate (compile-only, v5e)"
)
TPU_PYTHON = ROOT / ".venv-tpu" / "bin" / "python"
WORKER = "bench._flash_vmem_worker"
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


def _label(case: Case) -> tuple[str, str, str]:
    bq, bk, bqb, bkb = case.blocks
    compute = f"{case.compute} keys" if case.compute else "whole block"
    return f"{bq}×{bk}", f"{bqb}×{bkb}" if case.backward else "—", compute


def _row(case: Case, reply: dict[str, Any]) -> list[str]:
    fwd, bwd, compute = _label(case)
    row = [str(case.group), "fwd+bwd" if case.backward else "fwd", fwd, bwd, compute]
    if "error" in reply:
        return [*row, f"error: {reply['error']}", "—", "—", "—", "—"]
    est = reply["estimate_bytes"] / MiB
    measured = reply["min_mib"]
    if measured is None:
        shown, ratio = f"over {reply['top_mib']} (refused at every limit)", "—"
    else:
        shown, ratio = str(measured), f"{est / measured:.2f}"
    seconds = reply.get("compile_s")
    return [
        *row,
        shown,
        f"{est:,.1f}",
        ratio,
        (reply.get("refused_below_by") or "—").replace("backward_", "").replace("forward", "fwd"),
        "—" if seconds is None else f"{seconds:.1f}",
    ]


def run(quick: bool) -> dict[str, Any]:
    """The bisection over every cell; "unavailable" with the reason without libtpu."""
    if not TPU_PYTHON.exists():
        return unavailable(
            NAME, TITLE, quick, f"no TPU environment at {TPU_PYTHON} (run `make install`)"
        )
    sweep = QUICK if quick else FULL
    env = {"PYTHONPATH": str(ROOT), **{k: os.environ.get(k, v) for k, v in LIBTPU_ENV.items()}}
    deadline = time.perf_counter() + sweep.budget_s
    replies: list[tuple[Case, dict[str, Any]]] = []
    worker = Worker(WORKER, {"chip": CHIP, "shape": SHAPE}, env=env, python=str(TPU_PYTHON))
    try:
        hello = worker.hello
    except RuntimeError as err:  # libtpu or the kernel would not even load
        worker.close()
        return unavailable(NAME, TITLE, quick, str(err))
    died = None
    try:
        for case in sweep.cases():
            if died or time.perf_counter() > deadline:
                why = died or "skipped: the run's compile budget was spent"
                replies.append((case, {"error": why}))
                continue
            try:
                replies.append((case, worker.ask("measure", **case.request())))
            except RuntimeError as err:  # the worker died: this and later cells say so
                died = str(err)
                replies.append((case, {"error": died}))
    finally:
        worker.close()
    result = new_result(NAME, TITLE, quick)
    result["data"] = {
        "chip": CHIP,
        "device_kind": hello["device_kind"],
        "version": hello["version"],
        "shape": dict(zip(("batch", "seq_len", "heads", "head_dim"), SHAPE, strict=True)),
        "budget_fraction": hello["budget_fraction"],
        "policy_limit_mib": hello["policy_limit_mib"],
        "vmem_mib": hello["vmem_mib"],
        "rows": [{**case.request(), **reply} for case, reply in replies],
    }
    b, t, n, h = SHAPE
    notes = [
        "Compile-only (Mosaic), not measured on a TPU: Mosaic's own accept/refuse decision for "
        f"one device of a libtpu {hello['topology']} compile-only topology ({hello['device_kind']}"
        f"), zoo_flash_tpu {hello['version']}.",
        f"Shapes: B={b}, T={t:,}, N={n} query heads, K=N/G key/value heads, H={h}, causal, "
        "bfloat16; the call is the kernel's own custom_vjp on a bare [B, T, N, H] input "
        "(forward, or jax.vjp of it: forward, dQ and dK/dV kernels), blocks given by hand.",
        "smallest limit: FlashConfig.vmem_limit_bytes (the scoped VMEM limit every Mosaic "
        "kernel of the call gets) bisected to 1 MiB between 1 MiB and the chip's VMEM "
        f"({hello['vmem_mib']} MiB), the policy's limit for the chip "
        f"({hello['policy_limit_mib']:.0f} MiB) tried first: the call compiles at it and is "
        "refused for scoped VMEM (XLA error E1001, CompileTimeScopedVmemOom) 1 MiB below, "
        "where the kernel named in 'refused below by' ran out (fwd: forward; dq; dkdv). "
        "Acceptance is taken to be monotone in the limit. Compute: keys per compute sub-block "
        "of the forward and dQ kernels (BlockSizes.block_kv_compute, block_kv_bwd_compute); "
        "dK/dV always computes whole blocks.",
        "estimate: the policy's working-set estimate of the blocks "
        "(zoo_flash_tpu._policy.forward_vmem_bytes; with the backward, the larger of it and "
        "backward_vmem_bytes) with the heads per grid step the policy picks for the group; "
        f"the policy accepts blocks whose estimate is at most {hello['budget_fraction']:.0%} "
        "of the limit it passes. estimate ÷ smallest above 1: the estimate is conservative "
        "(it asks for more than Mosaic needs).",
        "compile s: one compile at the policy's limit (trace, lower, compile; this 2-core "
        "host, under load).",
    ]
    result["tables"].append(
        table(
            f"Smallest VMEM limit Mosaic accepts (MiB, compile-only) and the policy's estimate, "
            f"{hello['device_kind']}",
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
            [_row(case, reply) for case, reply in replies],
            notes,
        )
    )
    return result


def paragraphs(result: dict[str, Any]) -> list[str]:
    """What compute sub-blocks change, and whether the policy's estimate is conservative."""
    data = result["data"]
    rows = [r for r in data["rows"] if "error" not in r and r.get("min_mib")]
    if not rows:
        return []
    out = []
    pairs = []
    for whole in rows:
        if whole["compute"] is not None:
            continue
        sub = next(
            (
                r
                for r in rows
                if r["compute"] is not None
                and (r["group"], r["backward"], r["blocks"])
                == (whole["group"], whole["backward"], whole["blocks"])
            ),
            None,
        )
        if sub:
            pairs.append((whole, sub))
    if pairs:
        shown = "; ".join(
            f"{w['blocks'][0]}×{w['blocks'][1]} G={w['group']} "
            f"{'fwd+bwd' if w['backward'] else 'fwd'}: {w['min_mib']} → {s['min_mib']} MiB"
            for w, s in pairs
        )
        out.append(
            f"**Compute sub-blocks ({data['device_kind']}, compile-only).** Mosaic's smallest "
            f"accepted limit, whole-block compute → {SUB_BLOCK}-key sub-blocks: {shown}."
        )
    ratios = [(r["estimate_bytes"] / MiB / r["min_mib"], r) for r in rows]
    under = [(x, r) for x, r in ratios if x < 1]
    fraction = data.get("budget_fraction", 1.0)
    need = [(r["estimate_bytes"] / MiB / fraction) / r["min_mib"] for _, r in ratios]
    text = (
        f"**The policy's estimate against Mosaic.** The estimate is "
        f"{min(x for x, _ in ratios):.2f}–{max(x for x, _ in ratios):.2f}× the smallest "
        f"accepted limit over {len(ratios)} cells"
    )
    if under:
        text += f"; below it (not conservative) in {len(under)}: " + "; ".join(
            f"{r['blocks'][0]}×{r['blocks'][1]}"
            f"{'/' + str(r['compute']) if r['compute'] else ''} G={r['group']} "
            f"{'fwd+bwd' if r['backward'] else 'fwd'} ({r['estimate_bytes'] / MiB:.1f} "
            f"against {r['min_mib']} MiB)"
            for _, r in under
        )
    else:
        text += ", at or above it in every one: conservative"
    text += (
        f". The policy keeps blocks whose estimate fits {fraction:.0%} of the limit it passes, "
        f"so the limit it needs for them is {min(need):.2f}–{max(need):.2f}× Mosaic's smallest."
    )
    out.append(text)
    return out
