"""megablox compiled by Mosaic for real TPU generations from this host: forward and backward
through the public contract, on a 2x2 mesh (the contract runs the Mosaic call under
``shard_map``) and on one device, in bfloat16 and float32, with libtpu's compile-only devices.
``make test`` compiles the mesh in bfloat16 for v5e and one device in float32 for v6e; the
other programs of the two generations are marked ``full``.

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
GENERATIONS = ("v5e", "v6e")
PROGRAMS = ((4, "bfloat16"), (1, "bfloat16"), (1, "float32"))
#: Each generation once, and the mesh, one device, bfloat16 and float32 among them.
KEPT = (("v5e", 4, "bfloat16"), ("v6e", 1, "float32"))


# The environment with libtpu that `make install` creates.
TPU_PYTHON = pathlib.Path(os.environ.get("ZOO_TPU_PYTHON", REPO / ".venv-tpu" / "bin" / "python"))


def _compile(programs: list[tuple[str, int, str]]) -> list[dict]:
    assert TPU_PYTHON.exists(), (
        f"no {TPU_PYTHON}: `make install` makes it ($ZOO_TPU_PYTHON overrides)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "XLA_FLAGS"))}
    specs = ",".join(f"{g}:{d}:{t}" for g, d, t in programs)
    proc = subprocess.run(
        [str(TPU_PYTHON), str(WORKER), specs],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert rows, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    print(proc.stdout)  # the figures, shown with pytest -s
    assert sorted((r["generation"], r["devices"], r["dtype"]) for r in rows) == sorted(programs)
    errors = [r for r in rows if "error" in r]
    assert not errors, errors
    for r in rows:
        # The forward gmm, and the backward's transposed gmm (lhs) and tgmm (rhs).
        assert r["mosaic_calls"] == 3, r
        assert r["target"] == "tpu" and r["scope"], r
    return rows


def test_forward_and_backward_compile_with_mosaic_for_v5e_and_v6e():
    assert {g for g, _, _ in KEPT} == set(GENERATIONS)
    _compile(list(KEPT))


# The same code for the other programs of each generation: the kept v5e mesh (bfloat16) and
# v6e one-device (float32) compiles in the test above run each path.
@pytest.mark.full
def test_every_program_compiles_for_v5e_and_v6e():
    _compile([(g, d, t) for g in GENERATIONS for d, t in PROGRAMS if (g, d, t) not in KEPT])
