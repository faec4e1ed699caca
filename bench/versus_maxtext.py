"""zoo's train step against MaxText's on the same TPU: peaks and largest batches (compile only).

Both steps are compiled by libtpu's compile-only devices for the same model, topology, batch and
sequence length, on the same jax (0.12.0.1) and libtpu (0.0.50.1): zoo's with ``zoo compile`` in
``.venv-newest-tpu``, MaxText 0.2.5's with its own ``train_compile`` in a benchmark-only
environment (``build/maxtext-venv``, made here on first use: MaxText with ``--no-deps`` and
what ``train_compile`` imports, pinned by ``constraints.txt`` and
``bench/constraints-maxtext.txt``; no MaxText code is kept in this repository). Settings of
both: T = 8192, bfloat16 compute, float32 weights and AdamW state, full remat (each layer's
input kept), layers scanned, every chip on the fsdp axis. MaxText runs as it comes and with
``num_vocab_tiling=16`` (its logits tiled). Each side's largest batch is searched in whole rows a
chip; every compile also dumps XLA's buffer assignment, read with
``zoo_train.aot.read_dump``, so each peak comes with what it is made of.

A compile takes one to five minutes on two shared cores (one that does not fit stops at the
buffer assignment, in seconds), so results are kept in ``build/bench-cache/`` by settings and by
the tree they were compiled from (zoo's source files; MaxText's pins): a second run compiles
only what changed. Compiles run one at a time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import pathlib
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from .harness import ROOT, new_result, table, target, unavailable

NAME = "versus_maxtext"
TITLE = "zoo against MaxText 0.2.5: the train step's peak and largest batch on the same TPU"
SEQ_LEN = 8192
MAXTEXT_VERSION = "0.2.5"
#: What MaxText's ``train_compile`` imports, beside MaxText itself (installed ``--no-deps``).
MAXTEXT_NEEDS = (
    "jax[tpu]", "flax", "optax", "orbax-checkpoint", "grain", "omegaconf", "pydantic", "absl-py",
    "jaxtyping", "drjax", "aqtp", "qwix", "tokamax", "sentencepiece", "tiktoken",
    "pathwaysutils", "jinja2", "huggingface_hub", "transformers", "pillow", "sympy",
)  # fmt: skip
MAXTEXT_VENV = ROOT / "build" / "maxtext-venv"
MAXTEXT_PINS = ROOT / "bench" / "constraints-maxtext.txt"
ZOO_PYTHON = ROOT / ".venv-newest-tpu" / "bin" / "python"
CACHE = ROOT / "build" / "bench-cache" / f"{NAME}.json"
ZOO = "import sys; from zoo_train.cli import main; sys.exit(main())"
ZOO_SOURCES = ("packages", "kernels", "models", "training")
TIMEOUT_S = 1800
GIB = 2**30
#: MaxText 0.2.5 has no llama3.2-1b preset: its 8B preset with the 1B's shapes (tied head).
LLAMA_1B = (
    "model_name=llama3.1-8b", "override_model_config=true", "base_emb_dim=2048",
    "base_num_query_heads=32", "base_num_kv_heads=8", "base_num_decoder_layers=16",
    "base_mlp_dim=8192", "head_dim=64", "logits_via_embedding=true",
)  # fmt: skip
MAXTEXT_COMMON = (
    f"max_target_length={SEQ_LEN}", "remat_policy=full", "weight_dtype=float32",
    "dtype=bfloat16", "opt_type=adamw", "scan_layers=true", "ici_fsdp_parallelism=-1",
    "dataset_type=synthetic", "enable_checkpointing=false", "compile_topology_num_slices=1",
)  # fmt: skip
TILED = "num_vocab_tiling=16"


@dataclasses.dataclass(frozen=True)
class Case:
    """One model on one topology: zoo's preset and topology, and MaxText's (``None``: zoo only).

    ``start`` is the rows a chip each search starts from; ``target`` the largest batch zoo is
    to reach, as ``(rows a chip, what it is measured against)``, or ``None`` when it is set by
    MaxText's best in the same run."""

    model: str
    topology: str
    chips: int
    maxtext_topology: str | None = None
    maxtext_model: tuple[str, ...] = ()
    start: int = 4
    target: tuple[int, str] | None = None


FULL = [
    Case("llama-3.1-8b", "v5p:2x2x1", 4, "v5p-8", ("model_name=llama3.1-8b",)),
    Case("llama-3.2-1b", "v5e:2x4", 8, "v5e-8", LLAMA_1B, start=2),
    Case("qwen3-8b", "v5p:2x2x1", 4, target=(14, "2x the 28 rows (7 a chip) of zoo 0.10")),
    Case("gemma-3-4b", "v5p:2x2x1", 4, target=(12, "2x the 24 rows (6 a chip) of zoo 0.10")),
]
QUICK = [Case("llama-3.2-1b", "v5e:2x4", 8, "v5e-8", LLAMA_1B, start=1)]
SIDES = ("zoo", "maxtext", "maxtext_tiled")
LABELS = {"zoo": "zoo", "maxtext": "MaxText", "maxtext_tiled": f"MaxText {TILED}"}


# -- environments ------------------------------------------------------------------------------


def _newest_python() -> str | None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "newest_python.py")],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def _pins_id() -> str:
    text = (ROOT / "constraints.txt").read_bytes() + MAXTEXT_PINS.read_bytes()
    return hashlib.sha256(text + MAXTEXT_VERSION.encode()).hexdigest()[:16]


def maxtext_python() -> tuple[pathlib.Path | None, str | None]:
    """MaxText's environment (made or refreshed when its pins changed): ``(python, None)``, or
    ``(None, why not)``."""
    python = MAXTEXT_VENV / "bin" / "python"
    stamp = MAXTEXT_VENV / ".installed"
    if python.exists() and stamp.exists() and stamp.read_text() == _pins_id():
        return python, None
    interpreter = _newest_python()
    if interpreter is None:
        return None, "no Python >= 3.12 for MaxText (scripts/newest_python.py found none)"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    pins = ["-c", str(ROOT / "constraints.txt"), "-c", str(MAXTEXT_PINS)]
    steps = [
        [interpreter, "-m", "venv", str(MAXTEXT_VENV)],
        [*pip, *pins, "pip", "setuptools", "wheel"],
        [*pip, *pins, "--no-deps", f"maxtext=={MAXTEXT_VERSION}"],
        [*pip, *pins, *MAXTEXT_NEEDS],
    ]
    print(f"[bench] {NAME}: installing MaxText {MAXTEXT_VERSION} into {MAXTEXT_VENV}", flush=True)
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
            return None, f"installing MaxText failed: {tail}"
    stamp.write_text(_pins_id())
    return python, None


def _zoo_tree() -> str:
    """The identity of zoo's source as it is now: the index's blobs and any uncommitted change
    of the package directories."""
    listed = subprocess.run(
        ["git", "ls-files", "-s", "--", *ZOO_SOURCES], cwd=ROOT, capture_output=True
    ).stdout
    changed = subprocess.run(
        ["git", "diff", "HEAD", "--", *ZOO_SOURCES], cwd=ROOT, capture_output=True
    ).stdout
    untracked = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "--", *ZOO_SOURCES],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    digest = hashlib.sha256(listed + changed)
    for name in sorted(untracked):
        digest.update(name.encode() + (ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


# -- one compile -------------------------------------------------------------------------------


class Cache:
    """Compile results by key, kept in ``build/bench-cache/`` across runs."""

    def __init__(self, path: pathlib.Path = CACHE) -> None:
        self.path = path
        try:
            self.entries: dict[str, Any] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            self.entries = {}
        self.hits = 0

    def get(self, key: str) -> dict[str, Any] | None:
        found = self.entries.get(key)
        self.hits += found is not None
        return found

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.entries[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.entries, indent=1))


def _peak_summary(peak: Any) -> dict[str, Any] | None:
    """What is kept of a peak breakdown: its parts and the largest temporaries."""
    if peak is None:
        return None
    if not isinstance(peak, dict):
        peak = peak.as_dict(largest=12)
    keep = ("bytes", "argument_bytes", "temporary_bytes", "argument_parts", "largest_temporaries")
    return {k: peak[k] for k in keep if k in peak}


_OOM_TOTAL = re.compile(r"HLO temporaries \(([\d.]+)([KMGT]?)\)")


def _error_peak(error: str | None) -> int | None:
    """The whole peak XLA names in its out-of-memory error (its "temporaries" include the
    arguments live then)."""
    found = _OOM_TOTAL.search(error or "")
    if not found:
        return None
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[found.group(2)]
    return int(float(found.group(1)) * scale)


def _failed(rows: int, error: str, wall: float) -> dict[str, Any]:
    """A compile that neither fit nor ran out of memory (``fits`` is ``None``)."""
    return {"rows": rows, "fits": None, "error": error, "wall_s": wall}


def compile_zoo(case: Case, rows: int) -> dict[str, Any]:
    """``zoo compile`` at ``rows`` a chip in ``.venv-newest-tpu``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "report.json"
        args = ["compile", "--topology", case.topology, "--model", case.model, "--seq-len",
                str(SEQ_LEN), "--batch-size", str(rows * case.chips), "--set",
                "model_config.remat=true", "--json", str(out)]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.run(
            [str(ZOO_PYTHON), "-c", ZOO, *args], capture_output=True, text=True, timeout=TIMEOUT_S
        )
        wall = time.perf_counter() - start
        if not out.exists():
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
            return _failed(rows, f"exit {proc.returncode}: {tail}", wall)
        report = json.loads(out.read_text())
    device = report["per_device"] or {}
    return {
        "rows": rows,
        "fits": bool(report["fits"]),
        "peak_bytes": device.get("peak_bytes"),
        "argument_bytes": device.get("argument_bytes"),
        "temp_bytes": device.get("temp_bytes"),
        "hbm_bytes": device.get("hbm_bytes"),
        "peak": _peak_summary(report.get("peak")),
        "kernels": report.get("kernels"),
        "error": report.get("error"),
        "wall_s": wall,
    }


def compile_maxtext(case: Case, rows: int, tiled: bool, python: pathlib.Path) -> dict[str, Any]:
    """MaxText's ``train_compile`` at ``rows`` a chip, in its environment."""
    from zoo_train.aot import read_dump  # .venv has zoo-train: the dump is read here

    overrides = [
        f"compile_topology={case.maxtext_topology}",
        *case.maxtext_model,
        f"per_device_batch_size={rows}",
        *MAXTEXT_COMMON,
        *([TILED] if tiled else []),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        out, dump = pathlib.Path(tmp) / "report.json", pathlib.Path(tmp) / "dump"
        start = time.perf_counter()
        proc = subprocess.run(
            [
                str(python),
                str(ROOT / "bench" / "maxtext_worker.py"),
                str(out),
                str(dump),
                *overrides,
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            cwd=tmp,
        )
        wall = time.perf_counter() - start
        if not out.exists():
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
            return _failed(rows, f"exit {proc.returncode}: {tail}", wall)
        report = json.loads(out.read_text())
        peak = read_dump(dump) if dump.exists() else None
    device = report["per_device"] or {}
    fits = bool(report["fits"])
    error = report.get("error")
    if not fits and _error_peak(error) is None and peak is None:
        return _failed(rows, str(error), wall)
    peak_bytes = device.get("peak_bytes") if fits else None
    if peak_bytes is None:
        peak_bytes = peak.peak_bytes if peak is not None else _error_peak(error)
    return {
        "rows": rows,
        "fits": fits,
        "peak_bytes": peak_bytes,
        "argument_bytes": device.get("argument_bytes") or (peak and peak.argument_bytes),
        "temp_bytes": device.get("temp_bytes"),
        "peak": _peak_summary(peak),
        "error": error,
        "wall_s": wall,
    }


# -- the search --------------------------------------------------------------------------------


def largest_rows(
    probe: Callable[[int], dict[str, Any]], start: int, hbm: int | None, limit: int = 256
) -> tuple[int, dict[int, dict[str, Any]]]:
    """The most rows a chip whose step fits, and every compile it took (by rows).

    The peak is close to linear in the rows. Growing from ``start`` (halving first while it
    does not fit), the next probe is where the line through the two largest compiles meets the
    HBM (``hbm``): at least a row more, at most eightfold, doubling without a line. Once
    bracketed, where the line between the bracket's ends meets it, with a halving step whenever
    a probe did not halve the bracket. Returns 0 when even one row does not fit.
    """
    seen: dict[int, dict[str, Any]] = {}

    def fits(rows: int) -> bool:
        if rows not in seen:
            seen[rows] = probe(rows)
            if seen[rows]["fits"] is None:
                raise RuntimeError(f"{rows} rows a chip: {seen[rows]['error']}")
        return bool(seen[rows]["fits"])

    def line(r0: int, r1: int) -> int | None:
        p0, p1 = seen[r0].get("peak_bytes"), seen[r1].get("peak_bytes")
        if hbm is None or p0 is None or p1 is None or p1 <= p0:
            return None
        return int(r0 + (hbm - p0) * (r1 - r0) / (p1 - p0))

    rows = max(1, start)
    while not fits(rows):  # halve until one fits
        if rows == 1:
            return 0, seen
        rows = max(1, rows // 2)
    lo, hi = rows, None
    for r in sorted(seen, reverse=True):
        if not seen[r]["fits"]:
            hi = r
    while hi is None:  # grow
        known = sorted(seen)
        guess = line(known[-2], known[-1]) if len(known) >= 2 else None
        nxt = min(limit, 2 * lo if guess is None else max(lo + 1, min(8 * lo, guess)))
        if nxt == lo:
            return lo, seen
        if fits(nxt):
            lo = nxt
        else:
            hi = nxt
    halve = False
    while hi - lo > 1:  # narrow
        width = hi - lo
        guess = None if halve else line(lo, hi)
        mid = guess if guess is not None and lo < guess < hi else (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
        halve = hi - lo > width // 2
    return lo, seen


# -- the run -----------------------------------------------------------------------------------


def _run_case(
    case: Case, quick: bool, cache: Cache, maxtext: pathlib.Path | None, tree: str
) -> dict[str, Any]:
    sides = ["zoo"] + (["maxtext", "maxtext_tiled"] if case.maxtext_topology else [])
    if quick:
        sides = sides[:2]
    compiles: dict[str, dict[int, dict[str, Any]]] = {s: {} for s in sides}
    fresh = {"compiles": 0, "seconds": 0.0}

    def probe_for(side: str) -> Callable[[int], dict[str, Any]]:
        def probe(rows: int) -> dict[str, Any]:
            ident = tree if side == "zoo" else _pins_id()
            key = json.dumps([side, case.model, case.topology, rows, SEQ_LEN, ident])
            found = cache.get(key)
            if found is None:
                doing = f"{LABELS[side]} {case.model} on {case.topology}, {rows} rows a chip"
                print(f"[bench] {NAME}: {doing} ...", file=sys.stderr, flush=True)
                if side == "zoo":
                    found = compile_zoo(case, rows)
                else:
                    assert maxtext is not None
                    found = compile_maxtext(case, rows, side == "maxtext_tiled", maxtext)
                fresh["compiles"] += 1
                fresh["seconds"] += found["wall_s"]
                if found["fits"] is not None:
                    cache.put(key, found)
            compiles[side][rows] = found
            return found

        return probe

    best: dict[str, int | None] = {}
    hbm = None
    for side in sides:
        probe = probe_for(side)
        if quick:
            probe(case.start)
            best[side] = None
        else:
            best[side], _ = largest_rows(probe, case.start, hbm)
        hbm = hbm or next(
            (c["hbm_bytes"] for c in compiles["zoo"].values() if c.get("hbm_bytes")), None
        )
    # zoo's peak against MaxText's at every batch both fit: zoo is compiled wherever MaxText
    # was compiled and fit (and the other way round), so the comparison is at the same rows.
    if not quick and len(sides) > 1:
        fitting = lambda side: {r for r, c in compiles[side].items() if c["fits"]}
        for side in sides[1:]:
            for rows in sorted(fitting(side) - set(compiles["zoo"])):
                if rows <= (best["zoo"] or 0):
                    probe_for("zoo")(rows)
            for rows in sorted(fitting("zoo") - set(compiles[side])):
                if rows <= (best[side] or 0):
                    probe_for(side)(rows)
    return {
        "model": case.model,
        "topology": case.topology,
        "chips": case.chips,
        "maxtext_topology": case.maxtext_topology,
        "target": case.target,
        "best": best,
        "hbm_bytes": hbm,
        "compiles": {s: [compiles[s][r] for r in sorted(compiles[s])] for s in sides},
        "fresh": fresh,
    }


def run(quick: bool) -> dict[str, Any]:
    """Both sides for every case, one compile at a time, cached by settings and tree."""
    if not ZOO_PYTHON.exists():
        return unavailable(NAME, TITLE, quick, f"no {ZOO_PYTHON} (run `make install`)")
    maxtext, why = maxtext_python()
    if maxtext is None:
        return unavailable(NAME, TITLE, quick, str(why))
    cache, tree = Cache(), _zoo_tree()
    start = time.perf_counter()
    cases = []
    for case in QUICK if quick else FULL:
        try:
            cases.append(_run_case(case, quick, cache, maxtext, tree))
        except RuntimeError as err:  # a compile that neither fit nor ran out of memory
            cases.append({"model": case.model, "topology": case.topology, "error": str(err)})
    result = new_result(NAME, TITLE, quick)
    result["data"] = {
        "seq_len": SEQ_LEN,
        "cases": cases,
        "zoo_tree": tree,
        "maxtext_pins": _pins_id(),
        "wall_s": time.perf_counter() - start,
        "cache_hits": cache.hits,
    }
    return report(result)


# -- the tables --------------------------------------------------------------------------------


def _g(n: int | None) -> str:
    return "—" if n is None else f"{n / GIB:.2f}"


def _cell(c: dict[str, Any] | None) -> str:
    """``58.90 (22.44 / 45.40)``: peak (arguments / temporaries at the peak), or "no (…)"."""
    if c is None:
        return ""
    peak = c.get("peak") or {}
    args = peak.get("argument_bytes", c.get("argument_bytes"))
    temps = peak.get("temporary_bytes")
    parts = f" ({_g(args)} / {_g(temps)})" if args is not None and temps is not None else ""
    text = f"{_g(c.get('peak_bytes'))}{parts}"
    return text if c["fits"] else f"no: {text}"


def _layer_inputs(c: dict[str, Any]) -> int | None:
    """Bytes of the saved layer inputs live at zoo's peak: the stacked ``[L, rows, T, D]``
    residual the layers' scan keeps for the backward pass."""
    for b in (c.get("peak") or {}).get("largest_temporaries", []):
        if "layers" in b["name"] and b["shape"].startswith("bf16[") and b["shape"].count(",") == 3:
            return int(b["bytes"])
    return None


def _best_label(best: int | None, chips: int) -> str:
    return "—" if best is None else f"{best} ({best * chips})"


def _lighter(by: dict[str, dict[int, dict[str, Any]]]) -> tuple[list[int], bool]:
    """The rows a chip where zoo and a MaxText variant both fit, and whether zoo's peak is below
    every MaxText variant's that fit there."""
    both = sorted(
        r
        for r, c in by["zoo"].items()
        if c["fits"] and any(by.get(s, {}).get(r, {}).get("fits") for s in SIDES[1:])
    )
    lighter = all(
        by["zoo"][r]["peak_bytes"] < by[s][r]["peak_bytes"]
        for r in both
        for s in SIDES[1:]
        if by.get(s, {}).get(r, {}).get("fits")
    )
    return both, lighter


def _targets(case: dict[str, Any], by: dict[str, dict[int, dict[str, Any]]]) -> list[dict]:
    best, chips, model = case["best"], case["chips"], case["model"]
    zoo = best["zoo"]
    if zoo is None:
        return []
    if not case["maxtext_topology"]:
        if case.get("target") is None:
            return []
        need, why = case["target"]
        return [
            target(
                f"{model} on {case['topology']}: largest batch >= {need} rows a chip ({why})",
                f"{zoo} rows a chip ({zoo * chips})",
                zoo >= need,
            )
        ]
    mx_best = max((best[s] for s in SIDES[1:] if best.get(s) is not None), default=None)
    if not mx_best:
        return []
    where = f"{model} on {case['maxtext_topology']}"
    if model == "llama-3.1-8b":
        need = math.ceil(1.25 * mx_best)
        kept = _layer_inputs(by["zoo"][zoo])
        out = [
            target(
                f"{where}: zoo's largest batch >= 1.25x MaxText's best in the same run, each "
                "layer's input kept in HBM",
                f"zoo {zoo} rows a chip, MaxText's best {mx_best} (1.25x: {need}); the layers' "
                f"inputs live at zoo's peak: {_g(kept)} GiB",
                zoo >= need and kept is not None,
            )
        ]
    else:
        out = [
            target(
                f"{where}: zoo's largest batch above MaxText's best by at least one row a chip",
                f"zoo {zoo} rows a chip, MaxText's best {mx_best}",
                zoo >= mx_best + 1,
            )
        ]
    both, lighter = _lighter(by)
    out.append(
        target(
            f"{where}: zoo's peak below MaxText's at every batch both fit",
            f"compared at {', '.join(map(str, both)) or 'no'} rows a chip",
            lighter if both else None,
        )
    )
    return out


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The tables and targets, from the stored compiles."""
    data = result["data"]
    side_rows: list[list[str]] = []
    best_rows: list[list[str]] = []
    parts_rows: list[list[str]] = []
    targets: list[dict] = []
    for case in data["cases"]:
        if "error" in case:
            error = case["error"][:90]
            best_rows.append([case["model"], case["topology"], "—", "—", "—", "—", error])
            continue
        chips, best = case["chips"], case["best"]
        by = {s: {c["rows"]: c for c in case["compiles"][s]} for s in case["compiles"]}
        for rows in sorted({r for s in by for r in by[s]}):
            cells = [_cell(by.get(s, {}).get(rows)) for s in SIDES]
            side_rows.append([case["model"], case["topology"], f"{rows} ({rows * chips})", *cells])
        mx_best = max((best[s] for s in SIDES[1:] if best.get(s) is not None), default=None)
        zoo = best.get("zoo")
        ratio = "—" if not mx_best or zoo is None else f"{zoo / mx_best:.2f}x"
        fresh = case["fresh"]
        best_rows.append(
            [
                case["model"],
                case["topology"],
                *(_best_label(best.get(s), chips) for s in SIDES),
                ratio,
                f"{fresh['compiles']} compiles, {fresh['seconds'] / 60:.0f} min",
            ]
        )
        at = by["zoo"].get(zoo if zoo is not None else -1)
        for b in ((at or {}).get("peak") or {}).get("largest_temporaries", [])[:6]:
            where = f"zoo, {zoo} rows a chip"
            parts_rows.append([case["model"], where, _g(b["bytes"]), b["shape"], b["name"][:90]])
        targets += _targets(case, by)
    notes = [
        f"T = {data['seq_len']}, bfloat16 compute, float32 weights and AdamW, full remat, "
        "layers scanned, every chip on fsdp; jax 0.12.0.1, libtpu 0.0.50.1, compile-only "
        "devices. Peaks per chip in GiB as XLA counts them; in parentheses what was live at "
        "the peak (XLA's buffer assignment): arguments / temporaries.",
        "A row's batch is rows a chip (global batch). 'no:' did not fit: XLA's figure for the "
        "step it could not place.",
    ]
    took = (
        f"The whole cell took {data['wall_s'] / 60:.0f} min; {data['cache_hits']} compiles "
        "came from build/bench-cache (same settings and tree)."
    )
    columns = ["model", "topology", *(LABELS[s] for s in SIDES)]
    result["tables"] = [
        table(
            "Peak per chip, side by side (GiB)",
            ["model", "topology", "rows a chip (global)", *(LABELS[s] for s in SIDES)],
            side_rows,
            notes,
        ),
        table(
            "Largest batch that fits: rows a chip (global batch)",
            [*columns, "zoo / MaxText's best", "compiled this run"],
            best_rows,
            [took],
        ),
    ]
    if parts_rows:  # a quick run searches nothing
        result["tables"].append(
            table(
                "What zoo's peak is made of at its largest batch: the largest temporaries",
                ["model", "at", "GiB", "shape", "made by (named scope)"],
                parts_rows,
            )
        )
    result["targets"] = targets
    return result
