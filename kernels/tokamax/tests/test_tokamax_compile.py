"""tokamax's cross entropy compiled by Mosaic for TPU v5e, v5p and v6e from this host: the loss
and its gradients through the public contract, on a 4-device mesh (the contract runs the Mosaic
calls under ``shard_map``, each device its 8,192 tokens of Llama 3.2 1B's width against the
whole 128,256-token head), with libtpu's compile-only devices. ``make test`` compiles it for v5e and v6e; v5p, the same
program, is marked ``full``.

libtpu lives in its own environment (``.venv-newest-tpu``, which the newest leg names in
``$ZOO_TPU_PYTHON``); the compiles run there in a subprocess (``compile_worker.py``) and report
as JSON lines.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
WORKER = pathlib.Path(__file__).resolve().parent / "compile_worker.py"
TPU_PYTHON = pathlib.Path(
    os.environ.get("ZOO_TPU_PYTHON", REPO / ".venv-newest-tpu" / "bin" / "python")
)


def _compile(generations: tuple[str, ...]) -> None:
    assert TPU_PYTHON.exists(), (
        f"no {TPU_PYTHON}: `make install` makes it ($ZOO_TPU_PYTHON overrides)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "XLA_FLAGS"))}
    proc = subprocess.run(
        [str(TPU_PYTHON), str(WORKER), ",".join(generations)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert rows, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    print(proc.stdout)  # the figures, shown with pytest -s
    assert [r["generation"] for r in rows] == list(generations)
    errors = [r for r in rows if "error" in r]
    assert not errors, errors
    for r in rows:
        assert r["target"] == "tpu" and r["scope"], r
        assert r["mosaic_calls"] >= 2, r  # the forward and the backward kernels
        # The logits stay in VMEM tiles; the temporaries are the float32 head gradient, its
        # bfloat16 copy and the head's replicas (2.6-2.9 GiB measured), under the logits' 3.9.
        assert r["temp_bytes"] < r["logits_bytes"], r


def test_loss_and_gradients_compile_with_mosaic_for_v5e_and_v6e():
    _compile(("v5e", "v6e"))


# The same program for v5p: the v5e and v6e compiles above run its path.
@pytest.mark.full
def test_loss_and_gradients_compile_with_mosaic_for_v5p():
    _compile(("v5p",))
