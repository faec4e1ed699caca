"""deltanet_tpu compiled by Mosaic for real TPU generations from this host: forward and
backward through the public contract on a 2x2 mesh (the contract runs the Mosaic calls under
``shard_map``, a row a device), bfloat16, Qwen3.5-9B's DeltaNet widths at 4,096 tokens, with
libtpu's compile-only devices.

libtpu lives in its own environment (``make install`` creates ``.venv-tpu``; ``$ZOO_TPU_PYTHON``
overrides) so this one stays CPU-only; the compiles run there in a subprocess
(``compile_worker.py``) and report as JSON lines.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
WORKER = pathlib.Path(__file__).resolve().parent / "compile_worker.py"
GENERATIONS = ("v5e", "v5p", "v6e")
TPU_PYTHON = pathlib.Path(os.environ.get("ZOO_TPU_PYTHON", REPO / ".venv-tpu" / "bin" / "python"))


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    assert TPU_PYTHON.exists(), (
        f"no {TPU_PYTHON}: `make install` makes it ($ZOO_TPU_PYTHON overrides)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "XLA_FLAGS"))}
    proc = subprocess.run(
        [str(TPU_PYTHON), str(WORKER), ",".join(GENERATIONS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    found = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert found, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    print(proc.stdout)  # the figures, shown with pytest -s
    return found


def test_forward_and_backward_compile_with_mosaic_for_v5e_v5p_and_v6e(rows):
    assert {r["generation"] for r in rows} == set(GENERATIONS)
    for row in rows:
        assert "error" not in row, row
        # Forward, and the backward's forward (its states) and backward: three Mosaic calls.
        assert row["mosaic_calls"] >= 3, row
        assert row["scope"] and row["target"] == "tpu", row
