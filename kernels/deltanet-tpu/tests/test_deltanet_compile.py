"""deltanet_tpu compiled by Mosaic for real TPU generations from this host: forward and
backward through the public contract on a 2x2 mesh (the contract runs the Mosaic calls under
``shard_map``, a row a device), bfloat16, Qwen3.5-9B's DeltaNet widths at 4,096 tokens, with
libtpu's compile-only devices. ``make test`` compiles it for v5e and v6e; v5p, the same
program, is marked ``full``.

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
TPU_PYTHON = pathlib.Path(os.environ.get("ZOO_TPU_PYTHON", REPO / ".venv-tpu" / "bin" / "python"))


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
    assert {r["generation"] for r in rows} == set(generations)
    for row in rows:
        assert "error" not in row, row
        # Forward, and the backward's forward (its states) and backward: three Mosaic calls.
        assert row["mosaic_calls"] >= 3, row
        assert row["scope"] and row["target"] == "tpu", row


def test_forward_and_backward_compile_with_mosaic_for_v5e_and_v6e():
    _compile(("v5e", "v6e"))


# The same program for v5p: the v5e and v6e compiles above run its path.
@pytest.mark.full
def test_forward_and_backward_compile_with_mosaic_for_v5p():
    _compile(("v5p",))
