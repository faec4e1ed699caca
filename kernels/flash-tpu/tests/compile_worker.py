"""Compile a list of ``flash_compile.CompileCase``s (bench/flash_compile.py, beside this package's
sources) in one process, for TPU generations through libtpu's compile-only devices; write the
rows as JSON. Run by ``test_flash_compile.py`` in the environment with libtpu, so several
programs share one libtpu start-up.

Usage: python compile_worker.py OUT.json '[{"generation": "v5e", ...}, ...]'
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ.pop("ZOO_FLASH_TPU_INTERPRET", None)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))

from flash_compile import CompileCase, compile_case


def main(out: str, cases: str) -> None:
    rows = []
    for kwargs in json.loads(cases):
        if kwargs.get("window") is not None:
            kwargs["window"] = tuple(kwargs["window"])
        case = CompileCase(**kwargs)
        try:
            row = compile_case(case)
        except Exception as err:  # reported by the test, with the case's label
            row = {"label": case.label, "error": repr(err)[:2000]}
        # The shapes, so the test can size its bounds per row.
        rows.append(
            {**row, "batch": case.batch, "heads": case.num_heads, "kv_heads": case.num_kv_heads}
        )
        print(rows[-1], flush=True)
    pathlib.Path(out).write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
