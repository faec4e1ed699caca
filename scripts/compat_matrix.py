"""The compatibility matrix: every released attention-kernel version against each JAX.

Usage: python scripts/compat_matrix.py [--only DIST==VERSION ...] [--render]   (``make compat``)

For each JAX on :data:`JAX_AXIS`, an environment of that ``jax[tpu]`` (with its libtpu) on a
Python it supports; for each kernel release of ``releases.toml``, a fresh environment seeing it,
into which pip installs the release's wheel (built from its recorded tree, as ``make
wheelhouse`` does) beside the latest zoo-attention release. A release is

- **refused** when pip will not install it there (its declared JAX range excludes that JAX;
  pip's reason is kept),
- **verified** when it installs, passes the conformance cases of ``compat_check.py`` (forward
  and gradients against the float64 reference, fresh random inputs; TPU kernels in Pallas TPU
  interpret mode) and its forward and backward compile for TPU v5e and v6e through libtpu's
  compile-only devices, through the public contract,
- **broken** otherwise, with the first error.

Results go to ``docs/compatibility.json``; ``docs/compatibility.md`` is rendered from them
(``--render`` only renders). Environments are kept under ``build/matrix/`` and reused.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import newest_python
import wheelhouse
from envs import NEWEST_PACKAGES, PACKAGES, make_env
from packaging.requirements import Requirement
from release_table import ROOT

#: The JAX versions of the matrix and the Python each runs on ("newest": the interpreter the
#: newest-JAX test leg uses). 0.10.2 and 0.12.0.1 are the test legs; 0.11.2 is common in images.
JAX_AXIS: tuple[tuple[str, str], ...] = (
    ("0.10.2", "3.11"),
    ("0.11.2", "newest"),
    ("0.12.0.1", "newest"),
)
#: Kernel distributions on the matrix and the kernel name each registers.
KERNELS = {
    "zoo-flash-tpu": "flash_tpu",
    "zoo-chunked": "chunked",
    "zoo-splash": "splash",
    "zoo-megablox": "megablox",
    "zoo-deltanet-tpu": "deltanet_tpu",
    # tokamax needs jax >= 0.11.1: its range refuses the 0.10.2 column.
    "zoo-tokamax": "tokamax",
}
CONTRACT = "zoo-attention"
BUILD = ROOT / "build" / "matrix"
JSON_PATH = ROOT / "docs" / "compatibility.json"
DOC_PATH = ROOT / "docs" / "compatibility.md"
CHECK = Path(__file__).resolve().parent / "compat_check.py"
#: libtpu's compile-only devices in several processes at once, with no chip opened.
TPU_ENV = {
    "TPU_ACCELERATOR_TYPE": "v5litepod-4",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}


def kernel_dirs() -> tuple[str, ...]:
    """The package directories of :data:`KERNELS`: a kernel's releases are those of its
    directory in releases.toml (a kernel with no release yet has no row)."""
    return tuple({**PACKAGES, **NEWEST_PACKAGES}[d] for d in KERNELS)


def _interpreter(python: str) -> str:
    if python == "newest":
        found = newest_python.find()
        if found is None:
            raise SystemExit(
                "no Python >= 3.12 for jax 0.11 and later; see scripts/newest_python.py"
            )
        return found
    if f"{sys.version_info[0]}.{sys.version_info[1]}" != python:
        raise SystemExit(f"run this with Python {python} (`make compat` does)")
    return sys.executable


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]


def base_env(jax_version: str, python: str) -> tuple[Path, Path, dict[str, str]]:
    """An environment with ``jax[tpu]==jax_version`` (and nothing of zoo's): its python, its
    site-packages directory and the versions of what matters in it."""
    path = BUILD / f"jax-{jax_version}"
    env_python = path / "bin" / "python"
    if not (path / ".installed").exists():
        _run([_interpreter(python), "-m", "venv", str(path)]).check_returncode()
        pip = [str(env_python), "-m", "pip", "--disable-pip-version-check", "-q", "install"]
        proc = _run([*pip, f"jax[tpu]=={jax_version}", "numpy"])
        if proc.returncode != 0:
            raise SystemExit(f"jax[tpu]=={jax_version} did not install:\n{proc.stderr[-2000:]}")
        (path / ".installed").touch()
    probe = (
        "import importlib.metadata as m, json, sys, sysconfig; print(json.dumps({'site': "
        "sysconfig.get_paths()['purelib'], 'python': sys.version.split()[0], **{n: m.version(n) "
        "for n in ('jax', 'jaxlib', 'libtpu')}}))"
    )
    info = json.loads(_run([str(env_python), "-c", probe], check=True).stdout)
    return env_python, Path(info.pop("site")), info


def release_wheels(house: Path) -> tuple[Path, list[wheelhouse.Release]]:
    """The latest zoo-attention release's wheel, and every kernel release (wheels in ``house``)."""
    contract = wheelhouse.releases(("packages/zoo-attention",))[-1]
    wheelhouse.build(contract, house)
    kernels = wheelhouse.releases(kernel_dirs())
    for release in kernels:
        wheelhouse.build(release, house)
    return house / contract.wheel_name, kernels


def _refusal(python: Path, contract: Path, house: Path, pin: str) -> str:
    """pip's reason, in its own words: the lines of a dry run that name the conflict."""
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python)]
    cmd += ["install", "--dry-run", "--no-index", f"--find-links={house}", str(contract), pin]
    proc = _run(cmd)
    lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines()]
    keep = [line for line in lines if " depends on " in line or "requires a different" in line]
    keep = keep or [line for line in lines if line.startswith("ERROR") and "http" not in line]
    return "; ".join(dict.fromkeys(keep)) or "pip refused it"


def _check(python: Path, check: str, kernel: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "JAX_", "TPU_"))}
    env.pop("PYTHONPATH", None)
    if check == "conformance":
        env |= {
            "JAX_PLATFORMS": "cpu",
            "ZOO_FLASH_TPU_INTERPRET": "1",
            "ZOO_SPLASH_INTERPRET": "1",
            "ZOO_MEGABLOX_INTERPRET": "1",
        }
    else:
        env |= TPU_ENV
    proc = _run([str(python), str(CHECK), check, kernel], env=env, cwd=python.parent)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {
            "ok": False,
            "error": f"{check}: the process failed (exit {proc.returncode}): {tail}",
        }


def check_release(
    release: wheelhouse.Release,
    contract: Path,
    house: Path,
    base: tuple[Path, Path],
    jax_version: str,
) -> dict:
    """One cell of the matrix: refused, verified or broken, with the reason or figures."""
    path = BUILD / "envs" / f"{release.distribution}-{release.version}-jax-{jax_version}"
    if path.exists():
        subprocess.run(["rm", "-rf", str(path)], check=True)
    start = time.perf_counter()
    cell: dict[str, Any] = {
        "distribution": release.distribution,
        "version": release.version,
        "jax": jax_version,
    }
    interpreter, site = base
    pin = f"{release.distribution}=={release.version}"
    try:
        python = make_env(
            path, site, [contract], pins=[pin], find_links=[house], interpreter=interpreter
        )
    except RuntimeError:
        reason = _refusal(path / "bin" / "python", contract, house, pin)
        return {**cell, "status": "refused", "detail": reason}
    kernel = KERNELS[release.distribution]
    conformance = _check(python, "conformance", kernel)
    compiled = _check(python, "compile", kernel) if conformance["ok"] else None
    failed = next((r for r in (conformance, compiled) if r is not None and not r["ok"]), None)
    cell["seconds"] = round(time.perf_counter() - start, 1)
    if failed is not None:
        return {**cell, "status": "broken", "detail": failed["error"]}
    assert compiled is not None  # the conformance check passed, so the compile check ran
    if conformance.get("serves") is not None:
        cell["serves"] = conformance["serves"]
    return {**cell, "status": "verified", "detail": "", "compiled": compiled["compiled"]}


def declared_jax(release: wheelhouse.Release) -> str:
    """The JAX range the release's ``pyproject.toml`` declares, as written there."""
    text = _run(["git", "show", f"{release.tree}:pyproject.toml"], cwd=ROOT, check=True).stdout
    for line in tomllib.loads(text)["project"]["dependencies"]:
        if Requirement(line).name == "jax":
            return line[len("jax") :].strip()
    return ""


def render(data: dict) -> str:
    """``docs/compatibility.md`` from the recorded results."""
    import compat_check

    axis = data["jax"]
    m, k, n, g = compat_check.GROUPED_SHAPE
    grouped_shape = f"`[{m}, {k}] x [{g}, {k}, {n}]` (bfloat16, {g} groups, some empty)"
    tokens, width, vocab = compat_check.CROSS_ENTROPY_SHAPE
    ce_shape = f"`[{tokens}, {width}] x [{width}, {vocab}]` (bfloat16)"
    head = [f"jax {j['jax']} (Python {j['python'][:4].rstrip('.')})" for j in axis]
    lines = [
        "# Compatibility: kernel releases × JAX",
        "",
        "Generated by `make compat` (`scripts/compat_matrix.py`) from `docs/compatibility.json`; "
        "do not edit by hand. `tests/test_compat_doc.py` checks it against `releases.toml`.",
        "",
        "Each released kernel version is installed by pip, from a wheel built from its recorded "
        "tree, beside the latest zoo-attention release into an environment that already has the "
        "column's `jax[tpu]` (and its libtpu). **verified**: it installed, passed the "
        f"conformance cases ({', '.join(f'`{c}`' for c in data['cases'])}: forward and gradients "
        "against the float64 reference, fresh random inputs; `flash_tpu` in Pallas TPU interpret "
        "mode on the CPU; `splash` in Pallas interpret mode, at the cases' lengths rounded up to "
        "multiples of 128), and its causal forward and backward "
        f"(bfloat16, {data['shape']}) compiled for TPU "
        f"{' and '.join(data['generations'])} through libtpu's compile-only devices. A "
        "grouped-matmul kernel (`megablox`) is checked the same way on its own contract: every "
        "case of `zoo_attention.grouped.testing` (Pallas TPU interpret mode on the CPU), and a "
        f"forward and backward of {grouped_shape} compiled for the same TPUs. A cross-entropy "
        "kernel (`tokamax`, which declares jax>=0.11.1) on its contract: the cases of "
        "`zoo_attention.cross_entropy.testing` its check serves, and a loss and its gradients "
        f"of {ce_shape} compiled for the same TPUs. "
        "**refused**: pip would not install it there, for the reason given. **broken**: it "
        "installed and failed, with the first error.",
        "",
        "The last column is what a release serves of attention contract 1.3 (zoo-attention "
        "1.3: sinks, and values whose head dim differs from the queries'), checked beside "
        "the latest zoo-attention release: a feature served passed its conformance case "
        "(`sinks-all-f32`, `mla-qk192-v128-causal`), one not served was refused naming it; "
        "**—** where that zoo-attention predates contract 1.3 (a release made before it "
        "serves neither: pinned, it is passed over for such calls with one warning).",
        "",
        "| release | declares jax | " + " | ".join(head) + " | contract 1.3 |",
        "|---|---|" + "---|" * len(axis) + "---|",
    ]
    notes: list[str] = []
    for row in data["releases"]:
        cells = []
        for j in axis:
            cell = row["cells"][j["jax"]]
            text = cell["status"]
            if cell["detail"]:
                if cell["detail"] not in notes:
                    notes.append(cell["detail"])
                text += f" ({notes.index(cell['detail']) + 1})"
            cells.append(text)
        name = f"{row['distribution']} {row['version']}"
        cells.append(_serves(row, axis))
        lines.append(f"| {name} | `{row['declared']}` | " + " | ".join(cells) + " |")
    unreleased = [d for d in KERNELS if d not in {r["distribution"] for r in data["releases"]}]
    if unreleased:
        lines += [
            "",
            f"Not on the matrix yet, having no release: {', '.join(unreleased)}.",
        ]
    lines += ["", "The environments:", ""]
    lines += [
        f"- jax {j['jax']}: jaxlib {j['jaxlib']}, libtpu {j['libtpu']}, Python {j['python']}"
        for j in axis
    ]
    if notes:
        lines += ["", "Reasons and first errors:", ""]
        lines += [f"{i}. {note}" for i, note in enumerate(notes, 1)]
    lines += ["", f"Recorded {data['date']}.", ""]
    return "\n".join(lines)


def _serves(row: dict, axis: list[dict]) -> str:
    """What the release serves of contract 1.3, from its newest verified cell that says."""
    for j in reversed(axis):
        served = (row["cells"].get(j["jax"]) or {}).get("serves")
        if served is not None:
            names = {"sinks": "sinks", "value_head_dim": "value head dim"}
            found = [names[f] for f, ok in served.items() if ok]
            return ", ".join(found) if found else "neither"
    return "—"


def _write(data: dict) -> None:
    JSON_PATH.write_text(json.dumps(data, indent=1) + "\n")
    DOC_PATH.write_text(render(data))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jax", action="append", default=[], help="re-check only this JAX's column (repeatable)"
    )
    parser.add_argument("--render", action="store_true", help="only render the recorded results")
    args = parser.parse_args(argv)
    if args.render:
        DOC_PATH.write_text(render(json.loads(JSON_PATH.read_text())))
        return 0
    import compat_check

    house = BUILD / "wheelhouse"
    contract, releases = release_wheels(house)
    old = json.loads(JSON_PATH.read_text()) if JSON_PATH.exists() else {}
    kept = {(r["distribution"], r["version"]): r["cells"] for r in old.get("releases", [])}
    old_axis = {j["jax"]: j for j in old.get("jax", [])}
    rows: dict[tuple[str, str], dict[str, Any]] = {
        (r.distribution, r.version): {
            "distribution": r.distribution,
            "version": r.version,
            "declared": declared_jax(r),
            "cells": {},
        }
        for r in releases
    }
    data: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "cases": list(compat_check.MATRIX_CASES),
        "generations": list(compat_check.GENERATIONS),
        "shape": "B={}, T={}, heads {}/{}, head dim {}".format(*compat_check.SHAPE),
        "jax": [],
        "releases": sorted(rows.values(), key=lambda r: (r["distribution"], _key(r["version"]))),
    }
    for jax_version, python in JAX_AXIS:
        redo = not args.jax or jax_version in args.jax
        if not redo and jax_version in old_axis:
            data["jax"].append(old_axis[jax_version])
            for key, row in rows.items():
                row["cells"][jax_version] = kept.get(key, {}).get(jax_version)
            continue
        interpreter, site, info = base_env(jax_version, python)
        data["jax"].append(info)
        for release in releases:
            key = (release.distribution, release.version)
            cell = check_release(release, contract, house, (interpreter, site), jax_version)
            rows[key]["cells"][jax_version] = cell
            print(
                f"{key[0]} {key[1]} on jax {jax_version}: {cell['status']} {cell['detail']}",
                flush=True,
            )
    _write(data)
    print(f"wrote {DOC_PATH.relative_to(ROOT)}")
    return 0


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".") if x.isdigit())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
