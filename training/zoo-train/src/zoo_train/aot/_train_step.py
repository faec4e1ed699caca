"""The run's train step, lowered and compiled for a mesh of compile-only devices.

Nothing here is special to ahead-of-time compilation: the step is the one ``zoo train`` and
``zoo finetune`` take, the ``train_step`` of the same :class:`~zoo_train.Trainer` (LoRA
adapters, preference losses and mixtures of experts included); only the arguments are abstract
(``ShapeDtypeStruct``s carrying their shardings), so no weight is ever allocated.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding

import zoo_attention
import zoo_models

from ..loop import Trainer
from ..parallel import is_array_like
from ..peft import LoRAConfig
from ..settings import TrainConfig
from ._abstract_batch import abstract_batch
from ._hbm import StepMemory, from_compiled, from_oom
from ._peak import PeakBreakdown, dump_options, read_dump
from ._topology import available_hbm


@dataclasses.dataclass(frozen=True)
class StepSetup:
    """What the compiled step is.

    Attributes:
        trainer: the run's trainer, as the run builds it (its model a builder: nothing
            allocated).
        model: the model's configuration.
        seq_len: tokens per row.
        lora: the LoRA adapters trained, if any (for the optimizer-state comparison).
    """

    trainer: Trainer
    model: zoo_models.ModelConfig
    seq_len: int
    lora: LoRAConfig | None = None

    @property
    def config(self) -> TrainConfig:
        """The run's config (at the micro-batch the settings give)."""
        return self.trainer.config

    @property
    def mesh(self) -> Mesh:
        """The mesh of compile-only devices."""
        return self.trainer.mesh

    @property
    def rules(self) -> Mapping[str, Any]:
        """The sharding rules."""
        return self.trainer.rules


@dataclasses.dataclass(frozen=True)
class StepReport:
    """One compile: the figures, or XLA's reason it did not compile.

    ``optimizer_bytes`` is the optimizer state's share of the arguments, per device;
    ``all_gather_bytes`` what the compiled program's all-gathers bring each device (see
    :func:`all_gather_bytes`); ``peak`` what is live at the peak, buffer by buffer, from XLA's
    buffer assignment (``None`` where XLA wrote none), for a step that does not fit too.
    """

    batch_size: int
    memory: StepMemory | None
    compile_s: float
    kernels: list[dict[str, Any]]
    mosaic_calls: int
    error: str | None = None
    collectives: dict[str, int] = dataclasses.field(default_factory=dict)
    optimizer_bytes: int | None = None
    all_gather_bytes: int | None = None
    peak: PeakBreakdown | None = None

    @property
    def fits(self) -> bool:
        """Whether the step compiled and fits the device's HBM."""
        return self.memory is not None and self.memory.fits


def bytes_per_device(tree: Any) -> int:
    """Bytes of the abstract arrays of ``tree`` that one device holds (by their shardings)."""
    total = 0
    for x in jax.tree.leaves(tree):
        sharding = getattr(x, "sharding", None)
        shard = sharding.shard_shape(x.shape) if isinstance(sharding, NamedSharding) else x.shape
        total += math.prod(shard) * jnp.dtype(x.dtype).itemsize
    return total


def optimizer_state_bytes(trainer: Trainer) -> int:
    """Per-device bytes of the optimizer state of ``trainer``'s run (planned, not allocated)."""
    return bytes_per_device(trainer.plan.template.opt_state)


COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")


def count_collectives(text: str) -> dict[str, int]:
    """Collective instructions in a compiled module's text (an async pair counted once)."""
    return {op: len(re.findall(rf"\s{re.escape(op)}(?:-start)?\(", text)) for op in COLLECTIVES}


_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2,
                "f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8}  # fmt: skip
_GATHER = re.compile(r"=\s*(.*?)\s+all-gather(?:-start)?\(")
_SHAPE = re.compile(r"\b([a-z]+[0-9]*)\[([0-9,]*)\]")


def all_gather_bytes(text: str) -> int:
    """Bytes the all-gathers of a compiled module's text produce on one device: each
    instruction's result (an async start's last shape, its output) counted once as written, so
    one in a loop body (the layers' scan) counts once, not once per layer."""
    total = 0
    for result in _GATHER.findall(text):
        shapes = _SHAPE.findall(result)
        if not shapes:
            continue
        dtype, dims = shapes[-1]
        size = 1
        for d in filter(None, dims.split(",")):
            size *= int(d)
        total += size * _DTYPE_BYTES.get(dtype, 4)
    return total


def _kernels_in(text: str, resolved: zoo_attention.ResolutionLog) -> list[dict[str, Any]]:
    """Kernels resolved while tracing whose named scope is in the compiled HLO: attention's,
    then the grouped matmuls', the gated DeltaNet layers' linear attention, then the loss's fused
    cross entropy (``kind`` says which)."""
    found = []
    for kind, scope_name, rows in (
        ("attention", zoo_attention.scope_name, resolved.resolutions),
        ("grouped_matmul", zoo_attention.grouped.scope_name, resolved.grouped_matmul),
        ("linear_attention", zoo_attention.linear.scope_name, resolved.linear_attention),
        ("cross_entropy", zoo_attention.cross_entropy.scope_name, resolved.cross_entropy),
    ):
        for r in rows:
            scope = scope_name(r.kernel, r.version)
            if scope in text:
                found.append(
                    {"kernel": r.kernel, "version": r.version, "scope": scope, "kind": kind}
                )
    return found


def argument_names(batch: Any, state: Any) -> list[str]:
    """The step's flattened array arguments in order, each named by its path:
    ``batch['input_ids']``, ``state.params.stack.blocks[0].mlp.up.weight``, ..."""
    names = []
    for root, tree in (("batch", batch), ("state", state)):
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            if is_array_like(leaf):
                names.append(root + jax.tree_util.keystr(path))
    return names


def compile_step(
    setup: StepSetup, batch_size: int, *, on_compile: Callable[[int], None] | None = None
) -> StepReport:
    """Lower and compile the run's train step for a global micro-batch of ``batch_size`` rows.

    XLA dumps the compile's buffer assignment into a temporary directory, read into the
    report's ``peak`` (and deleted). An out-of-memory compile error becomes a report with the
    figures XLA gave (and what was live at the peak, from the buffer assignment XLA wrote
    before giving up); any other error propagates.
    """
    if on_compile is not None:
        on_compile(batch_size)
    trainer = setup.trainer.with_batch_size(batch_size)
    state = trainer.plan.template
    rows = batch_size * trainer.config.grad_accum
    batch = abstract_batch(rows, setup.seq_len, trainer.mesh, trainer.rules, trainer.loss_fn)
    hbm = available_hbm(trainer.mesh.devices.flat[0])
    optimizer = bytes_per_device(state.opt_state)
    names = argument_names(batch, state)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="zoo-compile-") as dump:
        try:
            with zoo_attention.recording() as resolved:
                lowered = trainer.train_step.lower(batch, state)
                compiled = lowered.compile(dump_options(dump))
        except Exception as err:
            arguments = bytes_per_device((state, batch))
            memory = from_oom(err, arguments)
            if memory is None:
                raise
            # What was live at the peak XLA could not place (its figure, the memory it needs,
            # also counts the gaps between buffers).
            peak = read_dump(dump, names)
            first = str(err).strip().splitlines()[0]
            seconds = time.perf_counter() - start
            return StepReport(
                batch_size, memory, seconds, [], 0, first[:300], {}, optimizer, peak=peak
            )
        seconds = time.perf_counter() - start
        peak = read_dump(dump, names)
    text = compiled.as_text()
    return StepReport(
        batch_size,
        from_compiled(compiled, hbm),
        seconds,
        _kernels_in(text, resolved),
        len(re.findall(r'custom_call_target="tpu_custom_call"', text)),
        collectives=count_collectives(text),
        optimizer_bytes=optimizer,
        all_gather_bytes=all_gather_bytes(text),
        peak=peak,
    )


@dataclasses.dataclass(frozen=True)
class SearchStep:
    """Where :func:`max_batch` stands after a compile.

    Attributes:
        report: the compile just done.
        lo: the largest micro-batch known to fit (0: none yet).
        hi: the smallest known not to fit (``None``: none yet, the search is still growing).
        limit: the largest micro-batch the search will try.
        left: about how many compiles remain once the answer is bracketed (``None`` before).
    """

    report: StepReport
    lo: int
    hi: int | None
    limit: int
    left: int | None


def default_batch_limit(seq_len: int, shards: int) -> int:
    """The largest micro-batch :func:`max_batch` tries unless told otherwise: a million tokens
    (``2**20 // seq_len`` rows, a multiple of ``shards``). Larger batches are not trained in
    one micro-batch, and a small model fits far beyond any useful size, so an unbounded search
    would compile ever larger steps for minutes."""
    rows = (1 << 20) // max(1, seq_len)
    return max(shards, rows - rows % shards)


def max_batch(
    setup: StepSetup,
    start: int,
    *,
    shards: int,
    limit: int = 1 << 16,
    on_compile: Callable[[int], None] | None = None,
    on_step: Callable[[SearchStep], None] | None = None,
) -> tuple[int, list[StepReport]]:
    """The largest global micro-batch (a multiple of ``shards``, at most ``limit``) whose step
    fits, and every compile it took; ``on_step`` hears where the search stands after each.

    The peak is close to linear in the rows, so the search interpolates: from ``start`` it grows
    (to where the line through the two largest fitting sizes meets the HBM, at least doubling,
    at most eightfold) or halves until the answer is bracketed, then narrows the bracket by
    false position (where the line between its two ends meets the HBM), with a bisection step
    whenever a probe did not halve the bracket, until it is one ``shards`` wide. Returns 0 when
    even ``shards`` rows do not fit, ``limit`` (snapped) when it fits.
    """
    reports: dict[int, StepReport] = {}
    top = max(shards, int(limit) - int(limit) % shards)
    lo, hi = 0, None

    def probe(b: int) -> bool:
        if b not in reports:
            reports[b] = compile_step(setup, b, on_compile=on_compile)
            fits = reports[b].fits
            new_lo, new_hi = (max(lo, b), hi) if fits else (lo, b if hi is None else min(hi, b))
            left = None
            if new_hi is not None and new_lo > 0:
                left = max(0, math.ceil(math.log2(max(1, (new_hi - new_lo) / shards))))
            if on_step is not None:
                on_step(SearchStep(reports[b], new_lo, new_hi, top, left))
        return reports[b].fits

    def snap(b: float) -> int:
        b = int(b)
        return max(shards, b - b % shards)

    def peak(b: int) -> int | None:
        memory = reports[b].memory
        return None if memory is None else memory.peak_bytes

    hbm = None
    b = min(snap(start), top)
    while hi is None:  # grow until a size does not fit (or the limit)
        if not probe(b):
            hi = b
            break
        lo = b
        hbm = reports[b].memory.hbm_bytes  # type: ignore[union-attr]
        if lo == top:
            return lo, list(reports.values())
        fitting = sorted(x for x in reports if reports[x].fits)
        target: float = 2 * lo
        if len(fitting) >= 2:
            (b0, b1), (p0, p1) = fitting[-2:], (peak(fitting[-2]), peak(fitting[-1]))
            if p0 is not None and p1 is not None and p1 > p0:
                target = min(8 * lo, max(2 * lo, b1 + (hbm - p1) * (b1 - b0) / (p1 - p0)))
        b = min(top, max(lo + shards, snap(target)))
    while lo == 0:  # halve until a size fits
        if hi == shards:
            return 0, list(reports.values())
        b = min(hi - shards, snap(hi // 2))
        if probe(b):
            lo = b
        else:
            hi = b
    bisect = False
    while hi - lo > shards:
        width = hi - lo
        p_lo, p_hi = peak(lo), peak(hi)
        memory = reports[lo].memory
        b = lo + width // 2
        if not bisect and p_lo is not None and p_hi is not None and p_hi > p_lo and memory:
            b = int(lo + (memory.hbm_bytes - p_lo) * width / (p_hi - p_lo))
        b = max(lo + shards, min(hi - shards, snap(b)))
        if probe(b):
            lo = b
        else:
            hi = b
        bisect = hi - lo > width // 2  # the line missed: halve the bracket next
    return lo, list(reports.values())
