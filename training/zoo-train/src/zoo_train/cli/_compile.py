"""``zoo compile``: the train step compiled for a TPU topology you do not have. Does it fit?"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from .._usage import UsageError
from ._exit import EXIT_DOES_NOT_FIT
from ._options import add_settings_flags
from ._training import settings_of


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _Watch:
    """What the compiles are doing: a line as each one starts and ends (with the bracket the
    search has narrowed the answer to), and one line, not a native stack dump, when SIGTERM or
    Ctrl-C ends the command in the middle of one."""

    def __init__(self) -> None:
        self.current: int | None = None
        self.best = 0

    def compiling(self, batch: int) -> None:
        self.current = batch
        _say(f"zoo: compiling micro-batch {batch} ...")

    def searched(self, step: Any) -> None:
        # The compile package loads JAX and Optax: not on the `zoo compile --help` path.
        from ..aot import gib

        r, m = step.report, step.report.memory
        self.best = step.lo
        figures = "" if m is None else f" (peak {gib(m.peak_bytes)} of {gib(m.hbm_bytes)})"
        said = f"micro-batch {r.batch_size} {'fits' if r.fits else 'does not fit'}{figures}"
        if step.hi is None:
            where = f"growing towards the limit {step.limit}"
        elif step.lo == 0:
            where = f"halving below {step.hi}"
        else:
            more = f"about {step.left} more compile{'' if step.left == 1 else 's'}"
            where = f"the answer is in [{step.lo}, {step.hi}): {more}" if step.left else "done"
        _say(f"zoo: {said}; {where}")

    @contextlib.contextmanager
    def one_line_on_sigterm(self) -> Iterator[None]:
        """Within the block, SIGTERM and SIGINT end the process with one line (exit 143 or
        130). XLA compiles in native code, where a Python signal handler would wait for the
        compile to end, and libtpu's own handler prints a stack dump: a thread woken through
        the signal wake-up descriptor reports and exits at once."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        read, write = os.pipe()
        os.set_blocking(write, False)
        previous = {s: signal.signal(s, lambda *_: None) for s in _STOPS}
        old_fd = signal.set_wakeup_fd(write)

        def watch() -> None:
            try:
                got = os.read(read, 1)
            except OSError:
                return
            if not got:
                return
            signum = got[0]
            doing = f" while compiling micro-batch {self.current}" if self.current else ""
            best = f"; the largest that fit so far: {self.best}" if self.best else ""
            _say(f"zoo: stopped by {signal.Signals(signum).name}{doing}{best}.")
            os._exit(128 + signum)

        thread = threading.Thread(target=watch, name="zoo-compile-signals", daemon=True)
        thread.start()
        try:
            yield
        finally:
            signal.set_wakeup_fd(old_fd)
            for s, handler in previous.items():
                signal.signal(s, handler)
            os.close(write)  # the watcher reads end-of-file and returns
            thread.join(timeout=1)
            os.close(read)


_STOPS = (signal.SIGTERM, signal.SIGINT)


def _describe(
    report: Any, setup: Any, topology: str, name: str, full_optimizer: int | None
) -> list[str]:
    # The compile and parallel packages load JAX: not on the `zoo compile --help` path.
    from .._precision import resolve_compute_dtype
    from ..aot import chip_name, gib
    from ..parallel import describe_mesh, platform_of

    config, model = setup.config, setup.model
    rows = report.batch_size * config.grad_accum
    compute = resolve_compute_dtype(config.compute_dtype, platform_of(setup.mesh)).name
    lines = [
        f"zoo: {name} step for {topology} "
        f"({setup.mesh.devices.size} x {chip_name(topology)}), "
        f"mesh {describe_mesh(setup.mesh)}",
        f"  global batch {rows} x {setup.seq_len} tokens (micro-batch {report.batch_size}, "
        f"grad accum {config.grad_accum}), compute {compute}, parameters "
        f"{model.param_dtype}, remat {'on' if model.remat else 'off'}",
    ]
    names = {
        kind: ", ".join(
            f"{k['kernel']} {k['version']}" for k in report.kernels if k["kind"] == kind
        )
        for kind in ("attention", "grouped_matmul", "linear_attention", "cross_entropy")
    }
    kernels = names["attention"] or "none found"
    if names["grouped_matmul"]:  # a mixture of experts: its grouped matmuls' kernel too
        kernels += f"; grouped matmul: {names['grouped_matmul']}"
    if names["linear_attention"]:  # gated DeltaNet layers: their recurrence's kernel
        kernels += f"; linear attention: {names['linear_attention']}"
    if names["cross_entropy"]:  # the loss's kernel (a model scored from its logits has none)
        kernels += f"; cross entropy: {names['cross_entropy']}"
    if report.memory is not None and not report.memory.from_error:
        lines.append(
            f"  attention: {kernels} ({report.mosaic_calls} Mosaic kernel calls in the step)"
        )
    gathers = report.collectives.get("all-gather", 0)
    if gathers and report.all_gather_bytes is not None:
        lines.append(
            f"  all-gathers: {gathers} in the program, {gib(report.all_gather_bytes)} a device "
            "as written (a layer loop's body counted once)"
        )
    m = report.memory
    if m is None:
        return lines
    if m.from_error:
        lines.append(
            f"  per device: arguments {gib(m.argument_bytes)}, temporaries {gib(m.temp_bytes)} "
            f"(from XLA's out-of-memory error: {report.error})"
        )
    else:
        lines.append(
            f"  per device: arguments {gib(m.argument_bytes)}, outputs {gib(m.output_bytes)} "
            f"({gib(m.alias_bytes)} reusing donated arguments), temporaries "
            f"{gib(m.temp_bytes)}, peak {gib(m.peak_bytes)}"
        )
    if report.peak is not None:
        lines += _peak_lines(report.peak)
        unlisted = m.peak_bytes - report.peak.peak_bytes
        if unlisted > max(2**20, m.peak_bytes // 100):
            lines.append(
                f"  (XLA's peak also counts {gib(unlisted)} that its buffer assignment lists no "
                "buffer for: on-chip scratch, reserved space, gaps between buffers)"
            )
    verdict = (
        f"fits, {gib(m.spare_bytes)} to spare"
        if m.fits
        else f"does not fit: {gib(-m.spare_bytes)} over"
    )
    lines.append(f"  HBM {gib(m.hbm_bytes)} per device: {verdict}")
    if report.optimizer_bytes is not None:
        lines.append(_optimizer_line(report.optimizer_bytes, full_optimizer))
    lines.append(f"  compiled in {report.compile_s:.1f} s")
    if not m.fits and not model.remat:
        lines.append("  (rematerialising layers often fits: --set model_config.remat=true)")
    return lines


#: How many of the largest temporaries `zoo compile` prints (the JSON has 20).
SHOWN_BUFFERS = 8
_PART_NAMES = {"state.params": "parameters", "state.opt_state": "optimizer state"}


def _peak_lines(peak: Any) -> list[str]:
    """What is live at the peak: its parts (the arguments by part of the state) and the
    largest temporaries, named by the scopes they were traced under."""
    from ..aot import gib  # the aot package loads JAX: not on the `--help` path

    parts = ", ".join(
        f"{_PART_NAMES.get(name, name)} {gib(size)}"
        for name, size in peak.argument_parts().items()
        if size >= 2**20
    )
    lines = [
        f"  live at the peak ({gib(peak.peak_bytes)}, XLA's buffer assignment): arguments "
        f"{gib(peak.argument_bytes)} ({parts}), temporaries {gib(peak.temporary_bytes)}"
        + (f", outputs {gib(peak.output_bytes)}" if peak.output_bytes >= 2**20 else "")
    ]
    largest = peak.largest(SHOWN_BUFFERS, "temporary")
    if largest:
        lines.append("  largest temporaries at the peak (the scope that made each):")
        width = max(len(b.shape) for b in largest)
        lines += [f"    {gib(b.bytes):>10}  {b.shape:<{width}}  {b.name}" for b in largest]
    return lines


def _optimizer_line(optimizer: int, full: int | None) -> str:
    """``optimizer state 0.01 GiB per device (every parameter trained: 1.20 GiB; LoRA saves
    1.19 GiB)``."""
    from ..aot import gib  # the compile package loads JAX: not on the `--help` path

    line = f"  optimizer state {gib(optimizer)} per device"
    if full is None:
        return line
    return f"{line} (every parameter trained: {gib(full)}; LoRA saves {gib(full - optimizer)})"


def _as_json(report: Any, setup: Any, topology: str, s: Any) -> dict[str, Any]:
    # parallel loads JAX: not on the `zoo compile --help` path.
    from ..parallel import mesh_sizes

    m = report.memory
    return {
        "topology": topology,
        "devices": int(setup.mesh.devices.size),
        "device_kind": setup.mesh.devices.flat[0].device_kind,
        "mesh": mesh_sizes(setup.mesh),
        "model": s.model if s.from_hf is None else s.from_hf,
        "lora": None if setup.lora is None else setup.lora.to_dict(),
        "objective": s.objective,
        "optimizer_bytes": report.optimizer_bytes,
        "seq_len": setup.seq_len,
        "batch_size": report.batch_size,
        "grad_accum": setup.config.grad_accum,
        "per_device": None if m is None else m.as_dict(),
        "fits": report.fits,
        "kernels": report.kernels,
        "mosaic_calls": report.mosaic_calls,
        "collectives": report.collectives,
        "all_gather_bytes": report.all_gather_bytes,
        "compile_s": round(report.compile_s, 2),
        "error": report.error,
        "peak": None if report.peak is None else report.peak.as_dict(),
    }


def _step_name(s: Any) -> str:
    """What is compiled, as the first line names it: ``llama-tiny train step``, or ``llama
    model from DIR, LoRA rank 8, dpo fine-tuning step``."""
    if s.from_hf is None and s.lora.rank == 0 and s.lora.from_ is None and s.objective == "sft":
        return f"{s.model} train"
    parts = [s.model if s.from_hf is None else f"model from {s.from_hf}"]
    if s.lora.rank or s.lora.from_:
        parts.append("LoRA" + (f" rank {s.lora.rank}" if s.lora.rank else ""))
    parts.append(f"{s.objective} fine-tuning")
    return ", ".join(parts)


def add_compile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--topology",
        required=True,
        metavar="TOPOLOGY",
        help="TPU topology, e.g. v5e:2x2, v5e:2x4, v5p:2x2x1, v6e:2x2, v4:2x2x1",
    )
    p.add_argument(
        "--json", dest="json_file", metavar="FILE", help="also write the figures as JSON"
    )
    p.add_argument(
        "--max-batch",
        action="store_true",
        help="find the largest global micro-batch that fits (a search on compiles)",
    )
    p.add_argument(
        "--max-batch-limit",
        type=int,
        default=None,
        metavar="N",
        help="with --max-batch: the largest micro-batch tried (default: a million tokens, "
        "2**20 // seq_len rows)",
    )
    p.add_argument(
        "--max-seq-len",
        action="store_true",
        help="find the longest sequence (1024 times a power of two) whose step fits at "
        "--batch-size rows, from --seq-len (a search on compiles)",
    )
    p.add_argument(
        "--max-seq-len-limit",
        type=int,
        default=1 << 17,
        metavar="N",
        help="with --max-seq-len: the longest sequence tried (default: 131072)",
    )
    add_settings_flags(p, "compile")


def run_compile(args: argparse.Namespace) -> int:
    """Run ``zoo compile``; returns 0 (fits), 3 (does not fit) or raises ``UsageError``."""
    # The compile, parallel and recipes packages load JAX: not on the `--help` path.
    from .._capacity import check_batch_fits
    from ..aot import (
        LibtpuMissingError,
        StepSetup,
        compile_step,
        default_batch_limit,
        optimizer_state_bytes,
        snap_length,
        topology_devices,
    )
    from ..parallel import batch_shards
    from ..recipes import (
        check_compiled_objective,
        check_json_output,
        check_mesh_fits,
        compiled_model_config,
        compiled_trainer,
        mesh_and_rules,
    )

    s = settings_of(args, "compile")
    check_compiled_objective(s.objective)  # type: ignore[attr-defined]
    check_json_output(args.json_file, [getattr(s, "from_hf", None), args.config])
    if args.max_batch and args.max_seq_len:
        raise UsageError("--max-batch and --max-seq-len search one at a time; pass one of them.")
    if args.max_seq_len and args.max_seq_len_limit < 1024:
        raise UsageError(
            f"--max-seq-len-limit must be at least 1024, got {args.max_seq_len_limit}."
        )

    try:
        devices = topology_devices(args.topology)
    except (LibtpuMissingError, ValueError) as e:
        raise UsageError.from_error(e) from None
    mesh, rules = mesh_and_rules(s.mesh_text, s.sharding, devices=devices)
    model = compiled_model_config(s)  # type: ignore[arg-type]
    first_len = snap_length(s.seq_len) if args.max_seq_len else s.seq_len
    check_mesh_fits(mesh, rules, model, batch_size=s.batch_size, seq_len=first_len)
    trainer, lora, full = compiled_trainer(s, model, mesh)  # type: ignore[arg-type]
    setup = StepSetup(trainer, model, s.seq_len, lora)
    name = _step_name(s)
    full_optimizer = None if lora is None else optimizer_state_bytes(full)
    extra: dict[str, Any] = {}
    shards = batch_shards(mesh, rules)
    if args.max_batch_limit is not None and args.max_batch_limit < shards:
        raise UsageError(
            f"--max-batch-limit must be at least the {shards} rows the mesh splits a batch "
            f"into, got {args.max_batch_limit}."
        )
    limit = args.max_batch_limit or default_batch_limit(s.seq_len, shards)
    # A host of the topology makes its share of the largest batch compiled: refused, with the
    # figure, before anything is built for it (a kernel's host-side tables grow with it too).
    hosts = len({d.process_index for d in devices})
    rows = (limit if args.max_batch else s.batch_size) * s.grad_accum
    length = snap_length(args.max_seq_len_limit) if args.max_seq_len else s.seq_len
    check_batch_fits(rows, length, "lower --batch-size, --grad-accum or --seq-len", processes=hosts)
    watch = _Watch()
    if args.max_seq_len:
        report, extra = _search_length(setup, s.batch_size, args.max_seq_len_limit, watch)
        setup = StepSetup(
            trainer, model, extra["max_seq_len"] or extra["seq_search"][0]["seq_len"], lora
        )
    elif args.max_batch:
        report, extra = _search(setup, s.batch_size, shards, limit, watch)
    else:
        _say(f"zoo: compiling for {args.topology} ...")
        with watch.one_line_on_sigterm():
            report = compile_step(setup, s.batch_size)
    for line in _describe(report, setup, args.topology, name, full_optimizer):
        print(line)
    if args.max_batch:
        tried = ", ".join(
            f"{r['batch_size']}{'' if r['fits'] else ' (no)'}" for r in extra["search"]
        )
        print(
            f"  largest micro-batch that fits: {extra['max_batch']} "
            f"({extra['max_batch'] * setup.config.grad_accum} rows a step; compiled {tried})"
        )
        if extra["max_batch"] == limit:
            print(f"  (the limit {limit} fits: raise --max-batch-limit to search further)")
    if args.max_seq_len:
        print(_length_line(extra, args.max_seq_len_limit))
    if args.json_file:
        figures = _as_json(report, setup, args.topology, s)
        figures["optimizer_bytes_full_finetune"] = full_optimizer
        pathlib.Path(args.json_file).write_text(json.dumps({**figures, **extra}, indent=1))
    if args.max_batch:
        return 0 if extra["max_batch"] > 0 else EXIT_DOES_NOT_FIT
    if args.max_seq_len:
        return 0 if extra["max_seq_len"] > 0 else EXIT_DOES_NOT_FIT
    return 0 if report.fits else EXIT_DOES_NOT_FIT


def _search_length(
    setup: Any, batch_size: int, limit: int, watch: _Watch
) -> tuple[Any, dict[str, Any]]:
    """``--max-seq-len``: the report to print (the longest that fit, else the shortest tried)
    and the search's figures for the JSON."""
    from ..aot import gib, max_seq_len, snap_length

    start = snap_length(setup.seq_len)
    _say(
        f"zoo: searching for the longest sequence that fits at micro-batch {batch_size}, from "
        f"{start} up to {snap_length(limit)} tokens (--max-seq-len-limit), doubling or halving"
    )

    def heard(length: int, report: Any) -> None:
        m = report.memory
        figures = "" if m is None else f" (peak {gib(m.peak_bytes)} of {gib(m.hbm_bytes)})"
        _say(f"zoo: {length} tokens {'fit' if report.fits else 'do not fit'}{figures}")

    with watch.one_line_on_sigterm():
        best, reports = max_seq_len(
            setup,
            batch_size,
            start=start,
            limit=limit,
            on_compile=lambda n: _say(f"zoo: compiling {n} tokens a row ..."),
            on_report=heard,
        )
    shown = reports[best] if best else reports[min(reports)]
    search = [
        {
            "seq_len": n,
            "fits": r.fits,
            "peak_bytes": None if r.memory is None else r.memory.peak_bytes,
            "collectives": r.collectives,
            "all_gather_bytes": r.all_gather_bytes,
            "compile_s": round(r.compile_s, 2),
        }
        for n, r in sorted(reports.items())
    ]
    return shown, {"max_seq_len": best, "seq_search": search}


def _length_line(extra: dict[str, Any], limit: int) -> str:
    """``longest sequence that fits: 32768 tokens (compiled 8192, 16384, 32768, 65536 (no))``."""
    best = extra["max_seq_len"]
    tried = ", ".join(f"{r['seq_len']}{'' if r['fits'] else ' (no)'}" for r in extra["seq_search"])
    if best == 0:
        return f"  no sequence of 1024 tokens or more fits (compiled {tried})"
    line = f"  longest sequence that fits: {best} tokens (compiled {tried})"
    if best * 2 > limit:
        line += f"\n  (the limit {limit} fits: raise --max-seq-len-limit to search further)"
    return line


def _search(
    setup: Any, start: int, shards: int, limit: int, watch: _Watch
) -> tuple[Any, dict[str, Any]]:
    """``--max-batch``: the report to print (the largest that fit, else the smallest tried)
    and the search's figures for the JSON."""
    from ..aot import max_batch

    _say(
        f"zoo: searching for the largest micro-batch that fits, from {start} "
        f"up to {limit} rows (--max-batch-limit); each compile takes seconds to minutes"
    )
    with watch.one_line_on_sigterm():
        best, reports = max_batch(
            setup,
            start,
            shards=shards,
            limit=limit,
            on_compile=watch.compiling,
            on_step=watch.searched,
        )
    fitting = [r for r in reports if r.fits]
    report = (
        max(fitting, key=lambda r: r.batch_size)
        if fitting
        else min(reports, key=lambda r: r.batch_size)
    )
    search = [
        {
            "batch_size": r.batch_size,
            "fits": r.fits,
            "peak_bytes": None if r.memory is None else r.memory.peak_bytes,
            "compile_s": round(r.compile_s, 2),
        }
        for r in sorted(reports, key=lambda r: r.batch_size)
    ]
    return report, {"max_batch": best, "search": search}
