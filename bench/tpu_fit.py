"""Does it fit? ``zoo compile`` for published model shapes on TPU topologies (compile only).

Runs ``zoo compile --max-batch`` in the TPU environment (``.venv-tpu``, which has libtpu): the
real train step (AdamW, float32 master weights, bfloat16 compute, layers scanned and
rematerialised, flash attention) at T=8192, fully sharded over every chip of the topology,
compiled by libtpu for chips this machine does not have. Reported per device: the peak XLA's
buffer assignment gives against the HBM it says is available, and the largest global batch
that fits. Nothing runs on a TPU, so there are no timings.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .harness import TPU_PYTHON, new_result, table, tpu_environment_missing, unavailable

NAME = "tpu_fit"
TITLE = "zoo compile: which models fit which TPU slices at T=8192 (compile only)"
ZOO = "import sys; from zoo_train.cli import main; sys.exit(main())"
SEQ_LEN = 8192
FULL = [
    (model, topology)
    for model in ("llama-3.2-1b", "mistral-7b", "llama-2-7b")
    for topology in ("v5e:2x4", "v5p:2x2x1", "v6e:2x4")
]
QUICK = [("llama-3.2-1b", "v5e:2x2")]
TIMEOUT_S = 3600
GIB = 2**30


def _devices(topology: str) -> int:
    shape = [int(x) for x in topology.split(":")[1].split("x")]
    n = 1
    for x in shape:
        n *= x
    return n


def _compile(model: str, topology: str, quick: bool, tmp: pathlib.Path) -> dict[str, Any]:
    out = tmp / f"{model}-{topology.replace(':', '_')}.json"
    args = ["--topology", topology, "--model", model, "--seq-len", str(SEQ_LEN),
            "--set", "model_config.remat=true", "--json", str(out)]  # fmt: skip
    # A v4 "device" is one TensorCore; the others one chip. Start at one row per device.
    args += ["--batch-size", str(_devices(topology))]
    if not quick:
        args.append("--max-batch")
    try:
        proc = subprocess.run(
            [str(TPU_PYTHON), "-c", ZOO, "compile", *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"model": model, "topology": topology, "error": f"over {TIMEOUT_S} s"}
    if not out.exists():
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"model": model, "topology": topology, "error": f"exit {proc.returncode}: {tail}"}
    return {**json.loads(out.read_text()), "returncode": proc.returncode, "stdout": proc.stdout}


def _gib(n: int | None) -> str:
    return "—" if n is None else f"{n / GIB:.2f}"


def run(quick: bool) -> dict[str, Any]:
    """Every (model, topology), two compiles side by side."""
    if why := tpu_environment_missing():
        return unavailable(NAME, TITLE, quick, why)
    cases = QUICK if quick else FULL
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=2) as pool:

        def compile_case(case: tuple[str, str]) -> dict[str, Any]:
            return _compile(*case, quick, pathlib.Path(tmp))

        reports = list(pool.map(compile_case, cases))
    result = new_result(NAME, TITLE, quick)
    result["data"] = {"seq_len": SEQ_LEN, "reports": reports}
    return report(result)


def _largest(r: dict[str, Any]) -> str:
    if "max_batch" not in r:
        return f"not searched ({r['compile_s']:.0f} s compile)"
    search = r.get("search") or []
    effort = f"{len(search)} compile{'s' if len(search) != 1 else ''}, "
    effort += f"{sum(s['compile_s'] for s in search):.0f} s"
    if r["max_batch"] == 0:
        return f"none: one row a device does not fit ({effort})"
    return f"{r['max_batch']} ({effort})"


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The table, from the stored ``zoo compile`` reports."""
    rows = []
    for r in result["data"]["reports"]:
        if "fits" not in r:  # zoo compile wrote no report
            rows.append([r["model"], r["topology"], "—", "—", "—", "—", "—", "—", r["error"][:80]])
            continue
        d = r["per_device"] or {}
        rows.append(
            [
                r["model"],
                f"{r['topology']} ({r['devices']} x {r['device_kind']})",
                str(r["batch_size"] * r["grad_accum"]),
                _gib(d.get("argument_bytes")),
                _gib(d.get("temp_bytes")),
                _gib(d.get("peak_bytes")),
                _gib(d.get("hbm_bytes")),
                "yes" if r["fits"] else "no",
                _largest(r),
            ]
        )
    result["tables"] = [
        table(
            f"Train step at T={SEQ_LEN}, fully sharded (fsdp = every device), remat on: per device",
            [
                "model",
                "topology",
                "batch",
                "args GiB",
                "temps GiB",
                "peak GiB",
                "HBM GiB",
                "fits",
                "largest batch that fits",
            ],
            rows,
            [
                "Compiled by libtpu's compile-only devices from a CPU host: XLA's own buffer "
                "assignment, no execution. The row's batch is the largest that fits (or the "
                "first tried when none does). HBM is what XLA reports available per device.",
                "AdamW with float32 master weights and moments (12 bytes a parameter), bfloat16 "
                "compute, the preset's own vocabulary, flash_tpu attention.",
                "XLA's temporaries can add up to more than its peak: buffers of the donated "
                "state are reused for temporaries. A row that does not fit shows the figures of "
                "XLA's out-of-memory error (arguments + temporaries as the peak).",
            ],
        )
    ]
    return result
