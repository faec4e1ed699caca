"""Compile MaxText's train step for a TPU topology and report its memory, in MaxText's own
environment (``build/maxtext-venv``, Python >= 3.12, made by ``bench/versus_maxtext.py``).

``python bench/maxtext_worker.py OUT.json DUMP_DIR KEY=VALUE ...`` runs MaxText's
``maxtext.trainers.pre_train.train_compile`` on its ``base.yml`` with the overrides given, with
``jax.stages.Lowered.compile`` wrapped so that the compile also dumps XLA's buffer assignment
into ``DUMP_DIR`` (read by the benchmark with ``zoo_train.aot.read_dump``) and its figures
(``memory_analysis()``), or the error that stopped it, are kept. Writes one JSON object to
``OUT.json``: ``fits``, ``per_device`` (argument, output, alias, temporary, peak and generated-code
bytes), ``compile_s``, ``error`` (the first line of a compile error; an out-of-memory one means
it does not fit). Standalone: it imports neither zoo nor the benchmark harness.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time
import traceback
from typing import Any

os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")  # no metadata server: a compile-only host
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

FIELDS = {
    "argument_bytes": "argument_size_in_bytes",
    "output_bytes": "output_size_in_bytes",
    "alias_bytes": "alias_size_in_bytes",
    "temp_bytes": "temp_size_in_bytes",
    "peak_bytes": "peak_memory_in_bytes",
    "generated_code_bytes": "generated_code_size_in_bytes",
}


def main(argv: list[str]) -> int:
    out, dump, overrides = pathlib.Path(argv[0]), argv[1], argv[2:]
    import jax.stages
    import maxtext
    from absl import app
    from maxtext.trainers.pre_train import train_compile

    seen: dict[str, Any] = {}
    original = jax.stages.Lowered.compile

    def compile_and_keep(self: Any, compiler_options: Any = None, **kw: Any) -> Any:
        options = {**(compiler_options or {}), "xla_dump_to": dump}
        start = time.perf_counter()
        try:
            compiled = original(self, options, **kw)
        except Exception as err:
            seen["compile_s"] = time.perf_counter() - start
            seen["error"] = (str(err).strip().splitlines() or [type(err).__name__])[0][:500]
            raise
        seen["compile_s"] = time.perf_counter() - start
        seen["memory"] = compiled.memory_analysis()
        return compiled

    jax.stages.Lowered.compile = compile_and_keep  # type: ignore[method-assign]
    base = pathlib.Path(maxtext.__file__).parent / "configs" / "base.yml"
    failure = None
    try:
        app.run(train_compile.main, argv=["train_compile", str(base), *overrides])
    except SystemExit as done:
        if done.code not in (0, None):
            failure = f"exit {done.code}"
    except Exception as err:  # the compile's own error is kept above; anything else is here
        failure = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:500]}"
        traceback.print_exc()
    memory = seen.get("memory")
    per_device = None
    if memory is not None:
        per_device = {k: int(getattr(memory, v, 0) or 0) for k, v in FIELDS.items()}
    result = {
        "fits": memory is not None,
        "per_device": per_device,
        "compile_s": round(seen.get("compile_s", 0.0), 2),
        "error": seen.get("error") or (failure if memory is None else None),
        "overrides": overrides,
    }
    out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
