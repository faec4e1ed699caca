"""Ahead-of-time compiles for v4, v5e, v5p and v6e through libtpu's compile-only devices.

Each compile goes through the public contract, ``zoo_attention.dot_product_attention(...,
implementation="flash_tpu")``, as a model calls it: on a 2x2 mesh (the contract runs the kernel
under ``shard_map``), and on one device with no mesh context at all (only the inputs' shardings
name the TPU target; the kernel's index maps must not ask the host for a TPU generation).

libtpu lives in its own environment (``make install`` creates ``.venv-tpu``; override with
``$ZOO_TPU_PYTHON``) so this one stays CPU-only; the compiles run there in subprocesses,
through ``bench/flash_compile.py`` (beside this package's sources), and the figures come back
as JSON.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
COMPILE = pathlib.Path(__file__).resolve().parents[1] / "bench" / "flash_compile.py"
KERNEL_NAMES = [
    f"zoo_flash_tpu_{k}" for k in ("forward", "backward_delta", "backward_dq", "backward_dkdv")
]
GENERATIONS = ("v4", "v5e", "v5p", "v6e")
HEAD_DIMS = (64, 128, 256)
B, T, N, K = 2, 8192, 16, 4


def _tpu_python() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("ZOO_TPU_PYTHON", REPO / ".venv-tpu" / "bin" / "python"))
    if not path.exists():
        pytest.fail(
            f"no TPU compile environment at {path}: run `make install` (it creates .venv-tpu with "
            "jax[tpu]) or point ZOO_TPU_PYTHON at a python that has libtpu."
        )
    return path


def _bench_command(out: pathlib.Path, *args: str) -> list[str]:
    return [str(_tpu_python()), str(COMPILE), "--compile-only", "--json", str(out), *args]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Every generation x head dim (forward + backward) on a 2x2 mesh, plus every generation on
    one device with segment ids, a local window and a soft cap.

    Subprocesses in parallel (libtpu start-up and compiles are single-threaded).
    """
    tmp = tmp_path_factory.mktemp("aot")
    env = {
        **os.environ,
        "TPU_ACCELERATOR_TYPE": "v5litepod-4",
        "TPU_WORKER_HOSTNAMES": "localhost",
        # Compile-only: no chip is opened, so several processes may load libtpu at once.
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    }
    env.pop("ZOO_FLASH_TPU_INTERPRET", None)
    common = ["--batch", str(B), "--heads", str(N), "--kv-heads", str(K), "--seq-lens", str(T)]
    common += ["--passes", "fwd+bwd", "--head-dims", ",".join(map(str, HEAD_DIMS))]
    runs = {
        "a": [*common, "--generations", "v4,v5e"],
        "b": [*common, "--generations", "v5p,v6e"],
    }
    procs = {
        name: subprocess.Popen(
            _bench_command(tmp / f"{name}.json", *args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name, args in runs.items()
    }
    segments = subprocess.run(
        _bench_command(
            tmp / "seg.json",
            *common[:-2],
            "--head-dims",
            "128",
            "--generations",
            ",".join(GENERATIONS),
            "--devices",
            "1",
            "--segments",
            "--window",
            "1024,0",
            "--soft-cap",
            "30",
        ),
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    outputs = {"seg": (segments.stdout, segments.stderr)}
    for name, proc in procs.items():
        outputs[name] = proc.communicate(timeout=900)
    rows = []
    for name, (stdout, stderr) in outputs.items():
        print(stdout)  # the figures, shown with pytest -s
        out = tmp / f"{name}.json"
        assert out.exists(), f"compile run wrote no results:\n{stdout}\n{stderr[-4000:]}"
        rows += json.loads(out.read_text())["rows"]
    errors = [r for r in rows if "error" in r]
    assert not errors, "\n".join(f"{r['label']}: {r['error']}" for r in errors)
    return rows


def test_every_generation_and_head_dim_compiles_with_mosaic(compiled: list[dict]) -> None:
    assert {(r["generation"], r["head_dim"], r["segments"], r["devices"]) for r in compiled} == {
        (g, h, False, 4) for g in GENERATIONS for h in HEAD_DIMS
    } | {(g, 128, True, 1) for g in GENERATIONS}
    for r in compiled:
        # Forward, delta, dq and dk/dv: four Mosaic kernels, each under its own name.
        assert r["mosaic_calls"] == 4, r
        assert r["kernels"] == KERNEL_NAMES, r
        # Under the mesh through shard_map; on one device called directly.
        assert r["shard_map"] == (r["devices"] > 1), r


def test_temporaries_are_linear_in_length_and_far_below_the_score_matrix(
    compiled: list[dict],
) -> None:
    for r in compiled:
        # Per device: the inputs q, k, v (the wrapper's padded/relaid copies are a few of these).
        local_q = B * T * N * r["head_dim"] * 2 / r["devices"]
        local_inputs = local_q * (1 + 2 * K / N)
        assert r["temp_bytes"] <= 8 * local_inputs, r
        # A materialised float32 score matrix would be B·N·T²·4 bytes (8 GiB here).
        used = r["temp_bytes"] * r["devices"]
        assert used < r["score_matrix_bytes_global"] / 16, r
        print(
            f"{r['label']}: {r['temp_bytes'] / 2**20:.1f} MiB temporaries per device, "
            f"{used / r['score_matrix_bytes_global']:.2%} of the score matrix"
        )


def _visible_pairs(window: list[int] | None) -> int:
    """(query, key) pairs a causal mask (with a ``(left, 0)`` window) lets through."""
    left = T if window is None else window[0]
    rows = np.arange(T)
    return int(np.sum(np.minimum(rows, left) + 1))


def test_cost_estimates_reach_xla(compiled: list[dict]) -> None:
    """XLA's cost model counts the kernels' FLOPs: at least the model FLOPs of the pairs the mask
    lets through (the causal half; with a window, far fewer), forward and backward."""
    for r in compiled:
        per_device = B * N * T * T * r["head_dim"] * 4 / r["devices"]  # forward, no mask
        model = B * N * _visible_pairs(r["window"]) * r["head_dim"] * 4 * 3 / r["devices"]
        assert model <= r["flops"] <= 3 * per_device * 2, r


def test_gemma3_heads_and_windows_compile_with_mosaic(tmp_path: pathlib.Path) -> None:
    """Gemma 3's attention (256-wide heads, a window of 1024, a group of 4), bfloat16, forward
    and backward through Mosaic on the tightest VMEM (v4) and on v5p."""
    env = {**os.environ, "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
    env.pop("ZOO_FLASH_TPU_INTERPRET", None)
    out = tmp_path / "gemma3.json"
    args = ["--batch", "1", "--heads", "8", "--kv-heads", "2", "--seq-lens", "8192"]
    args += ["--head-dims", "256", "--passes", "fwd+bwd", "--generations", "v4,v5p"]
    args += ["--devices", "1", "--window", "1023,0"]
    proc = subprocess.run(
        _bench_command(out, *args), capture_output=True, text=True, env=env, timeout=900
    )
    print(proc.stdout)
    assert out.exists(), proc.stderr[-4000:]
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 and not [r for r in rows if "error" in r], rows
    for r in rows:
        assert (r["head_dim"], r["window"], r["mosaic_calls"]) == (256, [1023, 0], 4), r


def test_sinks_and_latent_attention_compile_with_mosaic(tmp_path: pathlib.Path) -> None:
    """Contract 1.3 through Mosaic for v5e, v5p and v6e, bfloat16, forward and backward:
    gpt-oss's attention (64-wide heads, 64 query heads over 8, a window of 128, sinks) and
    DeepSeek-V3's latent attention (192-wide queries and keys, 128-wide values, MHA)."""
    env = {**os.environ, "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
    env.pop("ZOO_FLASH_TPU_INTERPRET", None)
    common = ["--batch", "1", "--seq-lens", "4096", "--passes", "fwd+bwd", "--devices", "1"]
    common += ["--generations", "v5e,v5p,v6e"]
    runs = {
        "gpt-oss": [
            "--heads",
            "64",
            "--kv-heads",
            "8",
            "--head-dims",
            "64",
            "--window",
            "127,0",
            "--sinks",
        ],
        "mla": [
            "--heads",
            "16",
            "--kv-heads",
            "16",
            "--head-dims",
            "192",
            "--value-head-dim",
            "128",
        ],
    }
    procs = {
        name: subprocess.Popen(
            _bench_command(tmp_path / f"{name}.json", *common, *args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name, args in runs.items()
    }
    rows = []
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=900)
        print(stdout)
        out = tmp_path / f"{name}.json"
        assert out.exists(), stderr[-4000:]
        rows += json.loads(out.read_text())["rows"]
    errors = [r for r in rows if "error" in r]
    assert not errors, "\n".join(f"{r['label']}: {r['error']}" for r in errors)
    assert len(rows) == 6
    for r in rows:
        assert r["mosaic_calls"] == 4 and r["kernels"] == KERNEL_NAMES, r
        assert (r["sinks"], r["value_head_dim"]) in ((True, 64), (False, 128)), r
        print(f"{r['label']}: {r['temp_bytes'] / 2**20:.1f} MiB temporaries, {r['compile_s']} s")
