"""``zoo compile``: the train step compiled for a TPU topology you do not have. Does it fit?"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from .._usage import UsageError
from ._exit import EXIT_DOES_NOT_FIT
from ._options import add_settings_flags

HELP = "compile the train step for a TPU topology you do not have: does it fit?"
DESCRIPTION = (
    "Lower and compile the real train step (forward, backward, optimizer update, with donation "
    "and shardings) for a TPU topology with libtpu's compile-only devices: no TPU and no weights "
    "needed. Takes the settings of `zoo train` and prints, per device, argument, output, "
    "temporary and peak bytes against the chip's HBM. Exit 0: it fits; 3: it does not; 2: a "
    "usage error."
)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _describe(report: Any, setup: Any, topology: str, preset: str) -> list[str]:
    from .._precision import resolve_compute_dtype
    from ..compile import gib
    from ..parallel import describe_mesh, platform_of

    config, model = setup.config, setup.model
    rows = report.batch_size * config.grad_accum
    compute = resolve_compute_dtype(config.compute_dtype, platform_of(setup.mesh)).name
    lines = [
        f"zoo compile: {preset} train step for {topology} "
        f"({setup.mesh.devices.size} x {setup.mesh.devices.flat[0].device_kind}), "
        f"mesh {describe_mesh(setup.mesh)}",
        f"  global batch {rows} x {setup.seq_len} tokens (micro-batch {report.batch_size}, "
        f"grad accum {config.grad_accum}), compute {compute}, parameters "
        f"{model.param_dtype}, remat {'on' if model.remat else 'off'}",
    ]
    kernels = ", ".join(f"{k['kernel']} {k['version']}" for k in report.kernels) or "none found"
    if report.memory is not None and not report.memory.from_error:
        lines.append(
            f"  attention: {kernels} ({report.mosaic_calls} Mosaic kernel calls in the step)"
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
    verdict = (
        f"fits, {gib(m.spare_bytes)} to spare"
        if m.fits
        else f"does not fit: {gib(-m.spare_bytes)} over"
    )
    lines.append(f"  HBM {gib(m.hbm_bytes)} per device: {verdict}")
    lines.append(f"  compiled in {report.compile_s:.1f} s")
    if not m.fits and not model.remat:
        lines.append("  (rematerialising layers often fits: --set model_config.remat=true)")
    return lines


def _as_json(report: Any, setup: Any, topology: str, preset: str) -> dict[str, Any]:
    from ..parallel import mesh_sizes

    m = report.memory
    return {
        "topology": topology,
        "devices": int(setup.mesh.devices.size),
        "device_kind": setup.mesh.devices.flat[0].device_kind,
        "mesh": mesh_sizes(setup.mesh),
        "model": preset,
        "seq_len": setup.seq_len,
        "batch_size": report.batch_size,
        "grad_accum": setup.config.grad_accum,
        "per_device": None if m is None else m.as_dict(),
        "fits": report.fits,
        "kernels": report.kernels,
        "mosaic_calls": report.mosaic_calls,
        "collectives": report.collectives,
        "compile_s": round(report.compile_s, 2),
        "error": report.error,
    }


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
        help="find the largest global batch that fits (bisection on compiles)",
    )
    add_settings_flags(p, "compile")


def run_compile(args: argparse.Namespace) -> int:
    """Run ``zoo compile``; returns 0 (fits), 3 (does not fit) or raises ``UsageError``."""
    from ..compile import LibtpuMissingError, StepSetup, compile_step, max_batch, topology_devices
    from ..parallel import batch_shards
    from ..recipes import check_mesh_fits, mesh_and_rules, preset_config
    from ._train import settings_of

    s = settings_of(args, "compile")

    try:
        devices = topology_devices(args.topology)
    except (LibtpuMissingError, ValueError) as e:
        raise UsageError.from_error(e) from None
    mesh, rules = mesh_and_rules(s.mesh_text, s.sharding, devices=devices)
    model = preset_config(s)  # the preset's own vocabulary, unlike a byte-level `zoo train`
    check_mesh_fits(mesh, rules, model, batch_size=s.batch_size)
    setup = StepSetup(model, s.train_config(), s.seq_len, mesh, rules)
    extra: dict[str, Any] = {}
    if args.max_batch:
        best, reports = max_batch(
            setup,
            s.batch_size,
            shards=batch_shards(mesh, rules),
            on_compile=lambda b: _say(f"zoo compile: compiling micro-batch {b} ..."),
        )
        fitting = [r for r in reports if r.fits]
        report = (
            max(fitting, key=lambda r: r.batch_size)
            if fitting
            else min(reports, key=lambda r: r.batch_size)
        )
        extra = {
            "max_batch": best,
            "search": [
                {
                    "batch_size": r.batch_size,
                    "fits": r.fits,
                    "peak_bytes": None if r.memory is None else r.memory.peak_bytes,
                    "compile_s": round(r.compile_s, 2),
                }
                for r in sorted(reports, key=lambda r: r.batch_size)
            ],
        }
    else:
        _say(f"zoo compile: compiling for {args.topology} ...")
        report = compile_step(setup, s.batch_size)
    for line in _describe(report, setup, args.topology, s.model):
        print(line)
    if args.max_batch:
        tried = ", ".join(
            f"{r['batch_size']}{'' if r['fits'] else ' (no)'}" for r in extra["search"]
        )
        print(
            f"  largest micro-batch that fits: {extra['max_batch']} "
            f"({extra['max_batch'] * setup.config.grad_accum} rows a step; compiled {tried})"
        )
    if args.json_file:
        path = pathlib.Path(args.json_file)
        path.write_text(
            json.dumps({**_as_json(report, setup, args.topology, s.model), **extra}, indent=1)
        )
    if args.max_batch:
        return 0 if extra["max_batch"] > 0 else EXIT_DOES_NOT_FIT
    return 0 if report.fits else EXIT_DOES_NOT_FIT
