"""``flash_tpu`` compiled for real TPU generations from this CPU host (compile only).

Runs ``python -m zoo_flash_tpu.bench --compile-only --json PATH`` in the TPU environment
(``.venv-tpu``, which has libtpu; the main environment stays CPU-only) and tabulates what the
compiled modules report: temporaries (``memory_analysis``) and XLA's cost model (which includes
the kernels' ``CostEstimate``). No TPU runs anything here, so there are no timings.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import tempfile
from typing import Any

from ._results import new_result, table, unavailable

NAME = "flash_tpu"
TITLE = "flash_tpu on TPU generations: compile-only figures"
TPU_PYTHON = pathlib.Path(__file__).resolve().parent.parent / ".venv-tpu" / "bin" / "python"
TIMEOUT_S = {True: 240, False: 600}


def arguments(quick: bool) -> list[str]:
    """What is compiled: generations, head dims, lengths, passes."""
    if quick:
        return ["--generations", "v5e", "--head-dims", "128", "--seq-lens", "8192"]
    return ["--generations", "v4,v5e,v5p,v6e", "--head-dims", "128", "--seq-lens", "8192"]


def run(quick: bool) -> dict[str, Any]:
    """The compile-only sweep; "unavailable" with the reason when it cannot run."""
    if not TPU_PYTHON.exists():
        return unavailable(
            NAME, TITLE, quick, f"no TPU environment at {TPU_PYTHON} (run `make install`)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "flash_tpu.json"
        cmd = [str(TPU_PYTHON), "-m", "zoo_flash_tpu.bench", "--compile-only", "--json", str(out)]
        try:
            proc = subprocess.run(
                cmd + arguments(quick), capture_output=True, text=True, timeout=TIMEOUT_S[quick]
            )
        except subprocess.TimeoutExpired:
            return unavailable(
                NAME, TITLE, quick, f"the compile-only run took over {TIMEOUT_S[quick]} s"
            )
        if not out.exists():
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
            return unavailable(
                NAME, TITLE, quick, f"zoo_flash_tpu.bench exited {proc.returncode}: {tail}"
            )
        report = json.loads(out.read_text())
    result = new_result(NAME, TITLE, quick)
    rows_in = report.get("rows", [])
    result["data"] = {
        "arguments": arguments(quick),
        "report": report,
        "returncode": proc.returncode,
    }
    rows = []
    for r in rows_in:
        if "error" in r:
            rows.append([r.get("label", "?"), "error", "—", "—", "—", "—", r["error"][:80]])
            continue
        per_device_scores = r["score_matrix_bytes_global"] / r["devices"]
        rows.append(
            [
                r["label"],
                r.get("device_kind", "?"),
                f"{r['temp_bytes'] / 2**20:.1f}",
                f"{100 * r['temp_bytes'] / per_device_scores:.2f}%",
                f"{(r['argument_bytes'] + r['output_bytes']) / 2**20:.0f}",
                f"{r['flops'] / 1e12:.3f}",
                f"{r['mosaic_calls']} ({', '.join(k.removeprefix('zoo_flash_tpu_') for k in r.get('kernels', []))})",
            ]
        )
    first = next((r for r in rows_in if "error" not in r), None)
    shape_note = (
        "Shapes: zoo_flash_tpu.bench defaults (B=2, 16 query heads, 4 kv heads, causal, bfloat16), "
        "sharded over a 2×2 (batch × heads) mesh of compile-only devices; figures are per device."
    )
    result["tables"].append(
        table(
            "flash_tpu, compiled by libtpu for each TPU generation (no execution)",
            [
                "case",
                "device",
                "temp MiB",
                "temp / T² f32 scores",
                "args+outputs MiB",
                "cost model TFLOP",
                "Mosaic calls",
            ],
            rows,
            [shape_note]
            + (
                [f"Compiled with libtpu; first case took {first['compile_s']} s to compile."]
                if first
                else []
            ),
        )
    )
    if proc.returncode != 0:
        result["notes"].append(
            f"zoo_flash_tpu.bench exited {proc.returncode}: some cases failed to compile."
        )
    return result
