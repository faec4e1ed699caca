"""``flash_tpu`` compiled for real TPU generations from this CPU host (compile only).

Runs ``flash_compile.py --compile-only --json PATH`` in the TPU environment (``.venv-tpu``,
which has libtpu; the main environment stays CPU-only) and tabulates what the compiled modules
report: temporaries (``memory_analysis``) and XLA's cost model (which includes the kernels'
``CostEstimate``). No TPU runs anything here, so there are no timings.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import tempfile
from typing import Any

from bench.harness import TPU_PYTHON, new_result, table, tpu_environment_missing, unavailable

NAME = "flash_tpu"
TITLE = "flash_tpu on TPU generations: compile-only figures"
COMPILE = pathlib.Path(__file__).resolve().parent / "flash_compile.py"
TIMEOUT_S = {True: 240, False: 600}


def arguments(quick: bool) -> list[str]:
    """What is compiled: generations, head dims, lengths, passes."""
    if quick:
        return ["--generations", "v5e", "--head-dims", "128", "--seq-lens", "8192"]
    return ["--generations", "v4,v5e,v5p,v6e", "--head-dims", "128", "--seq-lens", "8192"]


def run(quick: bool) -> dict[str, Any]:
    """The compile-only sweep; "unavailable" with the reason when it cannot run."""
    if why := tpu_environment_missing():
        return unavailable(NAME, TITLE, quick, why)
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "flash_tpu.json"
        cmd = [str(TPU_PYTHON), str(COMPILE), "--compile-only", "--json", str(out)]
        try:
            proc = subprocess.run(
                cmd + arguments(quick), capture_output=True, text=True, timeout=TIMEOUT_S[quick]
            )
        except subprocess.TimeoutExpired:
            return unavailable(NAME, TITLE, quick, f"compiling took over {TIMEOUT_S[quick]} s")
        if not out.exists():
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
            why = f"flash_compile.py exited {proc.returncode}: {tail}"
            return unavailable(NAME, TITLE, quick, why)
        compiled = json.loads(out.read_text())
    result = new_result(NAME, TITLE, quick)
    result["data"] = {
        "arguments": arguments(quick),
        "report": compiled,
        "returncode": proc.returncode,
    }
    return report(result)


def _row(r: dict[str, Any]) -> list[str]:
    if "error" in r:
        return [r.get("label", "?"), "error", "—", "—", "—", "—", r["error"][:80]]
    per_device_scores = r["score_matrix_bytes_global"] / r["devices"]
    kernels = ", ".join(k.removeprefix("zoo_flash_tpu_") for k in r.get("kernels", []))
    return [
        r["label"], r.get("device_kind", "?"), f"{r['temp_bytes'] / 2**20:.1f}",
        f"{100 * r['temp_bytes'] / per_device_scores:.2f}%",
        f"{(r['argument_bytes'] + r['output_bytes']) / 2**20:.0f}", f"{r['flops'] / 1e12:.3f}",
        f"{r['mosaic_calls']} ({kernels})",
    ]  # fmt: skip


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The table, from the stored compile reports."""
    rows = result["data"]["report"].get("rows", [])
    notes = [
        "Shapes: flash_compile.py defaults (B=2, 16 query heads, 4 kv heads, causal, bfloat16), "
        "sharded over a 2×2 (batch × heads) mesh of compile-only devices; figures are per device."
    ]
    first = next((r for r in rows if "error" not in r), None)
    if first:
        notes.append(f"Compiled with libtpu; first case took {first['compile_s']} s to compile.")
    if result["data"]["returncode"]:
        notes.append(f"flash_compile.py exited {result['data']['returncode']}: some cases failed.")
    result["tables"] = [
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
            [_row(r) for r in rows],
            notes,
        )
    ]
    return result
