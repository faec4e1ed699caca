"""Ahead-of-time compiles for v4, v5e, v5p and v6e through libtpu's compile-only devices.

Each compile goes through the public contract, ``zoo_attention.dot_product_attention(...,
implementation="flash_tpu")``, as a model calls it, forward and backward in bfloat16: on a 2x2
mesh (the contract runs the kernel under ``shard_map``), and on one device with no mesh context
at all (only the inputs' shardings name the TPU target; the kernel's index maps must not ask the
host for a TPU generation).

``make test`` compiles one program per generation, together every path: the 2x2 mesh (v5e,
128-wide heads); Gemma 3's 256-wide heads and window on the tightest VMEM (v4); DeepSeek-V3's
latent attention, 192-wide queries and keys over 128-wide values (v5p); gpt-oss's 64-wide heads,
window and sinks with packed segment ids and a soft cap on one device (v6e). The rest of the
matrix (every generation x head dim on the mesh, each model's attention on the other
generations) is marked ``full``.

libtpu lives in its own environment (``make install`` creates ``.venv-tpu``; override with
``$ZOO_TPU_PYTHON``) so this one stays CPU-only; the compiles run there in subprocesses
(``compile_worker.py``, through ``bench/flash_compile.py`` beside this package's sources), and
the figures come back as JSON.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import Any

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
WORKER = pathlib.Path(__file__).resolve().parent / "compile_worker.py"
KERNEL_NAMES = [
    f"zoo_flash_tpu_{k}" for k in ("forward", "backward_delta", "backward_dq", "backward_dkdv")
]
GENERATIONS = ("v4", "v5e", "v5p", "v6e")
HEAD_DIMS = (64, 128, 256)
B, T, N, K = 2, 8192, 16, 4


def _mesh(generation: str, head_dim: int) -> dict[str, Any]:
    """On a 2x2 mesh, under ``shard_map``."""
    return {"generation": generation, "batch": B, "seq_len": T, "num_heads": N,
            "num_kv_heads": K, "head_dim": head_dim, "backward": True, "devices": 4}  # fmt: skip


def _one_device(generation: str) -> dict[str, Any]:
    """On one device: segment ids, a local window and a soft cap."""
    return {**_mesh(generation, 128), "devices": 1, "segments": True, "window": (1024, 0),
            "soft_cap": 30.0}  # fmt: skip


def _gemma3(generation: str) -> dict[str, Any]:
    """Gemma 3: 256-wide heads, a window of 1024, a group of 4."""
    return {"generation": generation, "batch": 1, "seq_len": 8192, "num_heads": 8,
            "num_kv_heads": 2, "head_dim": 256, "window": (1023, 0), "backward": True,
            "devices": 1}  # fmt: skip


def _gpt_oss(generation: str, **extra: Any) -> dict[str, Any]:
    """gpt-oss: 64-wide heads, 64 query heads over 8, a window of 128, sinks."""
    return {"generation": generation, "batch": 1, "seq_len": 4096, "num_heads": 64,
            "num_kv_heads": 8, "head_dim": 64, "window": (127, 0), "sinks": True,
            "backward": True, "devices": 1, **extra}  # fmt: skip


def _mla(generation: str) -> dict[str, Any]:
    """DeepSeek-V3's latent attention: 192-wide queries and keys, 128-wide values, MHA."""
    return {"generation": generation, "batch": 1, "seq_len": 4096, "num_heads": 16,
            "num_kv_heads": 16, "head_dim": 192, "value_head_dim": 128, "backward": True,
            "devices": 1}  # fmt: skip


#: One program per generation, every path among them (see the module's doc).
KEPT = [
    _mesh("v5e", 128),
    _gemma3("v4"),
    _mla("v5p"),
    _gpt_oss("v6e", segments=True, soft_cap=30.0),
]
#: The same code for the other generations and head dims.
REST = [
    *(_mesh(g, h) for g in GENERATIONS for h in HEAD_DIMS if (g, h) != ("v5e", 128)),
    *(_one_device(g) for g in GENERATIONS),
    _gemma3("v5p"),
    *(_gpt_oss(g) for g in ("v5e", "v5p", "v6e")),
    *(_mla(g) for g in ("v5e", "v6e")),
]


def _tpu_python() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("ZOO_TPU_PYTHON", REPO / ".venv-tpu" / "bin" / "python"))
    if not path.exists():
        pytest.fail(
            f"no TPU compile environment at {path}: run `make install` (it creates .venv-tpu with "
            "jax[tpu]) or point ZOO_TPU_PYTHON at a python that has libtpu."
        )
    return path


def _compile(tmp: pathlib.Path, groups: list[list[dict[str, Any]]]) -> list[dict]:
    """Each group of cases in one worker process, the groups side by side (libtpu start-up
    and compiles are single-threaded); every row, with no compile error."""
    env = {**os.environ, "TPU_ACCELERATOR_TYPE": "v5litepod-4", "TPU_WORKER_HOSTNAMES": "localhost",
           "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}  # fmt: skip
    env.pop("ZOO_FLASH_TPU_INTERPRET", None)
    procs = []
    for i, cases in enumerate(groups):
        out = tmp / f"rows{i}.json"
        cmd = [str(_tpu_python()), str(WORKER), str(out), json.dumps(cases)]
        procs.append((out, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)))  # fmt: skip
    rows = []
    for out, proc in procs:
        stdout, stderr = proc.communicate(timeout=900)
        print(stdout)  # the figures, shown with pytest -s
        assert out.exists(), f"compile run wrote no results:\n{stdout}\n{stderr[-4000:]}"
        rows += json.loads(out.read_text())["rows"]
    errors = [r for r in rows if "error" in r]
    assert not errors, "\n".join(f"{r['label']}: {r['error']}" for r in errors)
    return rows


def _key(case: dict[str, Any]) -> tuple:
    window = case.get("window")
    return (case["generation"], case["head_dim"], case.get("value_head_dim") or case["head_dim"],
            case["devices"], bool(case.get("segments")), bool(case.get("sinks")),
            None if window is None else list(window))  # fmt: skip


def _row_key(r: dict) -> tuple:
    return (r["generation"], r["head_dim"], r["value_head_dim"], r["devices"], r["segments"],
            r["sinks"], r["window"])  # fmt: skip


def _visible_pairs(t: int, window: list[int] | None) -> int:
    """(query, key) pairs a causal mask (with a ``(left, 0)`` window) lets through."""
    left = t if window is None else window[0]
    rows = np.arange(t)
    return int(np.sum(np.minimum(rows, left) + 1))


def _check(rows: list[dict], cases: list[dict[str, Any]]) -> None:
    assert sorted(map(_row_key, rows), key=str) == sorted(map(_key, cases), key=str)
    for r in rows:
        # Forward, delta, dq and dk/dv: four Mosaic kernels, each under its own name.
        assert r["mosaic_calls"] == 4, r
        assert r["kernels"] == KERNEL_NAMES, r
        # Under the mesh through shard_map; on one device called directly.
        assert r["shard_map"] == (r["devices"] > 1), r
        # Temporaries per device at T=8192: linear in length (the wrapper's padded/relaid
        # copies of q, k and v are a few of these) and far below a materialised float32 score
        # matrix.
        b, t, n, k, h, d = (r["batch"], r["seq_len"], r["heads"], r["kv_heads"], r["head_dim"],
                            r["devices"])  # fmt: skip
        if t == T:
            local_q = b * t * n * h * 2 / d
            assert r["temp_bytes"] <= 8 * local_q * (1 + 2 * k / n), r
            assert r["temp_bytes"] * d < r["score_matrix_bytes_global"] / 16, r
        # XLA's cost model counts the kernels' FLOPs (their CostEstimate): at least the model
        # FLOPs of the pairs the mask lets through, forward and backward.
        per_pair = 2 * h + 2 * r["value_head_dim"]
        dense = b * n * t * t * per_pair / d
        model = b * n * _visible_pairs(t, r["window"]) * per_pair * 3 / d
        assert model <= r["flops"] <= 3 * dense * 2, r
        print(
            f"{r['label']}: {r['temp_bytes'] / 2**20:.1f} MiB temporaries per device, "
            f"{r['temp_bytes'] * d / r['score_matrix_bytes_global']:.2%} of the score matrix, "
            f"{r['compile_s']} s"
        )


def test_every_generation_compiles_its_program_with_mosaic(tmp_path: pathlib.Path) -> None:
    assert {c["generation"] for c in KEPT} == set(GENERATIONS)
    _check(_compile(tmp_path, [KEPT]), KEPT)


# The same kernels and wrapper as the kept programs above, for the other generations, head
# dims and models: test_every_generation_compiles_its_program_with_mosaic covers each path.
@pytest.mark.full
def test_every_generation_and_head_dim_compiles_with_mosaic(tmp_path: pathlib.Path) -> None:
    half = len(REST) // 2
    _check(_compile(tmp_path, [REST[:half], REST[half:]]), REST)
