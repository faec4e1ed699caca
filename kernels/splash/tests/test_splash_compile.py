"""Ahead-of-time compiles for v4, v5e, v5p and v6e through libtpu's compile-only devices: a
train step with ``splash`` as its attention (``zoo compile``; v5e, v5p and v6e), every feature
at once under a mesh, and the widest heads on one device (see ``splash_aot.py``).

libtpu lives in its own environment (``make install`` creates ``.venv-tpu``; override with
``$ZOO_TPU_PYTHON``) so this one stays CPU-only; the compiles run there in two subprocesses side
by side (libtpu start-up and compiles are mostly one thread each).
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


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    python = pathlib.Path(os.environ.get("ZOO_TPU_PYTHON", REPO / ".venv-tpu" / "bin" / "python"))
    if not python.exists():
        pytest.fail(
            f"no TPU compile environment at {python}: run `make install` (it creates .venv-tpu) "
            "or point ZOO_TPU_PYTHON at a python with libtpu and zoo-train."
        )
    tmp = tmp_path_factory.mktemp("aot")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "XLA_FLAGS"))}
    # Compile-only: no chip is opened, so several processes may load libtpu at once.
    env |= {
        "TPU_ACCELERATOR_TYPE": "v5litepod-4",
        "TPU_WORKER_HOSTNAMES": "localhost",
        "TPU_SKIP_MDS_QUERY": "1",
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    }
    # About the same time each: v4 has no train step (see splash_aot.py).
    halves = {"a": ("v4", "v6e"), "b": ("v5e", "v5p")}
    procs = {
        name: subprocess.Popen(
            [str(python), str(DRIVER), str(tmp / f"{name}.json"), *generations],
            cwd=tmp,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, generations in halves.items()
    }
    found = []
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        out = tmp / f"{name}.json"
        assert out.exists(), f"the compiles wrote no results:\n{stdout[-2000:]}\n{stderr[-4000:]}"
        found += json.loads(out.read_text())["rows"]
    errors = [r for r in found if r.get("error")]
    assert not errors, "\n".join(f"{r['generation']} {r['what']}: {r['error']}" for r in errors)
    return found


def test_every_generation_compiled_each_program(rows: list[dict]) -> None:
    steps = [(g, "step") for g in GENERATIONS if g != "v4"]
    assert sorted((r["generation"], r["what"]) for r in rows) == sorted(
        steps + [(g, w) for g in GENERATIONS for w in ("features", "wide")]
    )


def test_the_train_step_compiles_with_splash_named_in_it(rows: list[dict]) -> None:
    for r in (r for r in rows if r["what"] == "step"):
        assert r["exit_code"] == 0 and r["fits"], r
        # Resolved while tracing, and the contract's scope is in the compiled HLO, where
        # `zoo profile` finds it.
        # (The loss's cross-entropy kernel is listed beside it.)
        attention = [k for k in r["kernels"] if k.get("kind", "attention") == "attention"]
        assert [(k["kernel"], k["version"]) for k in attention] == [
            ("splash", zoo_attention.get_kernel("splash").version)
        ]
        # The layers are scanned: one forward, one dQ and one dK/dV kernel in the program.
        assert r["mosaic_calls"] == 3, r
        assert r["mesh"]["tensor"] == 2 and r["mesh"]["fsdp"] >= 2, r


def test_every_feature_and_the_widest_heads_compile_with_mosaic(rows: list[dict]) -> None:
    label = f"splash {zoo_attention.get_kernel('splash').version}"
    for r in (r for r in rows if r["what"] != "step"):
        assert r["kernels"] == ["splash_mha_fwd", "splash_mha_dq", "splash_mha_dkv"], r
        assert r["mosaic_calls"] == 3, r
        # `zoo profile` names each of the three Mosaic calls by kernel and version.
        assert r["profiled_as"] == [label] * 3, r
        # Under the mesh through shard_map; on one device called directly.
        assert r["shard_map"] == (r["devices"] > 1), r
