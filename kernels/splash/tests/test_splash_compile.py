"""Ahead-of-time compiles for v4, v5e, v5p and v6e through libtpu's compile-only devices: a
train step with ``splash`` as its attention (``zoo compile``; v5e, v5p and v6e), every feature
at once under a mesh, and the widest heads on one device (see ``splash_aot.py``).

``make test`` compiles each program once: the train step (v5e), every feature under a 2x2 mesh
(v6e) and the widest heads on one device (v4, the tightest VMEM); flash_tpu's compile tests
compile for v5p in ``make test``. The other generations' programs, the same code, are marked
``full``.

libtpu lives in its own environment (``make install`` creates ``.venv-tpu``; override with
``$ZOO_TPU_PYTHON``) so this one stays CPU-only; the compiles run there in subprocesses
(libtpu start-up and compiles are mostly one thread each).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

import zoo_attention

REPO = pathlib.Path(__file__).resolve().parents[3]
DRIVER = pathlib.Path(__file__).resolve().parent / "splash_aot.py"
GENERATIONS = ("v4", "v5e", "v5p", "v6e")
# v4 has no train step (see splash_aot.py).
ALL = [
    (g, w) for g in GENERATIONS for w in ("step", "features", "wide") if (g, w) != ("v4", "step")
]
#: Each program once, each on a generation of its own.
KEPT = [("v4", "wide"), ("v5e", "step"), ("v6e", "features")]


def _compile(tmp: pathlib.Path, groups: list[list[tuple[str, str]]]) -> list[dict]:
    """Each group in one subprocess, the groups side by side; every row, checked."""
    python = pathlib.Path(os.environ.get("ZOO_TPU_PYTHON", REPO / ".venv-tpu" / "bin" / "python"))
    if not python.exists():
        pytest.fail(
            f"no TPU compile environment at {python}: run `make install` (it creates .venv-tpu) "
            "or point ZOO_TPU_PYTHON at a python with libtpu and zoo-train."
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "XLA_FLAGS"))}
    # Compile-only: no chip is opened, so several processes may load libtpu at once.
    env |= {
        "TPU_ACCELERATOR_TYPE": "v5litepod-4",
        "TPU_WORKER_HOSTNAMES": "localhost",
        "TPU_SKIP_MDS_QUERY": "1",
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    }
    procs = [
        subprocess.Popen(
            [str(python), str(DRIVER), str(tmp / f"{i}.json"), *(f"{g}:{w}" for g, w in group)],
            cwd=tmp,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, group in enumerate(groups)
    ]
    rows = []
    for i, proc in enumerate(procs):
        stdout, stderr = proc.communicate(timeout=600)
        out = tmp / f"{i}.json"
        assert out.exists(), f"the compiles wrote no results:\n{stdout[-2000:]}\n{stderr[-4000:]}"
        rows += json.loads(out.read_text())["rows"]
    errors = [r for r in rows if r.get("error")]
    assert not errors, "\n".join(f"{r['generation']} {r['what']}: {r['error']}" for r in errors)
    assert sorted((r["generation"], r["what"]) for r in rows) == sorted(
        p for group in groups for p in group
    )
    for r in rows:
        (_check_step if r["what"] == "step" else _check_attention)(r)
    return rows


def _check_step(r: dict) -> None:
    """The train step compiles with splash named in it."""
    assert r["exit_code"] == 0 and r["fits"], r
    # Resolved while tracing, and the contract's scope is in the compiled HLO, where
    # `zoo profile` finds it. (The loss's cross-entropy kernel is listed beside it.)
    attention = [k for k in r["kernels"] if k.get("kind", "attention") == "attention"]
    assert [(k["kernel"], k["version"]) for k in attention] == [
        ("splash", zoo_attention.get_kernel("splash").version)
    ]
    # The layers are scanned: one forward, one dQ and one dK/dV kernel in the program.
    assert r["mosaic_calls"] == 3, r
    assert r["mesh"]["tensor"] == 2 and r["mesh"]["fsdp"] >= 2, r


def _check_attention(r: dict) -> None:
    """Every feature and the widest heads compile with Mosaic."""
    label = f"splash {zoo_attention.get_kernel('splash').version}"
    assert r["kernels"] == ["splash_mha_fwd", "splash_mha_dq", "splash_mha_dkv"], r
    assert r["mosaic_calls"] == 3, r
    # `zoo profile` names each of the three Mosaic calls by kernel and version.
    assert r["profiled_as"] == [label] * 3, r
    # Under the mesh through shard_map; on one device called directly.
    assert r["shard_map"] == (r["devices"] > 1), r


def test_every_generation_compiled_each_program(tmp_path: pathlib.Path) -> None:
    assert sorted(w for _, w in KEPT) == ["features", "step", "wide"]
    _compile(tmp_path, [KEPT])


# The same programs for the other generations: test_every_generation_compiled_each_program
# compiles each program and each generation.
@pytest.mark.full
def test_every_generation_compiled_each_program_everywhere(tmp_path: pathlib.Path) -> None:
    rest = [p for p in ALL if p not in KEPT]
    _compile(tmp_path, [rest[::2], rest[1::2]])
