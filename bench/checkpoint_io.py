"""Checkpoint save and restore throughput against a plain file write/read of the same bytes.

The state is a real ``zoo_train.TrainState`` (parameters + AdamW moments) of the GPT-2 124M
model (full run) or the small byte-vocabulary model (quick run). Three writers are timed:
``zoo_train.Checkpointer`` (Orbax plus zoo's metadata and per-array checksums), a bare
``orbax.checkpoint.StandardCheckpointer``, and one ``write()`` of every array's bytes to a
single file (with and without ``fsync``). Restores read back into a template of the same
structure. Everything runs on the same disk; reads follow writes, so they may come from the
page cache for every method alike.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
import time
from typing import Any

from .harness import figure, median, new_result, save_figure, table
from .training_zoo import zoo_config

NAME = "checkpoint"
TITLE = "Checkpoint save and restore throughput"


def _state(quick: bool) -> tuple[Any, str]:
    import jax
    import optax

    import zoo_models
    import zoo_train

    if quick:
        arch = {"n_layer": 4, "n_embd": 256, "n_head": 4, "n_positions": 256, "vocab_size": 256}
        label = "small (4L, d=256)"
    else:
        arch = {
            "n_layer": 12,
            "n_embd": 768,
            "n_head": 12,
            "n_positions": 1024,
            "vocab_size": 50257,
        }
        label = "GPT-2 124M"
    model = zoo_models.build(zoo_config(arch), key=jax.random.key(0))
    state = zoo_train.init_train_state(model, optax.adamw(3e-4))
    return state, label


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _plain(leaves: list, root: pathlib.Path, fsync: bool) -> tuple[float, float]:
    import numpy as np

    arrays = [np.asarray(x) for x in leaves]
    path = root / f"plain-{int(fsync)}.bin"

    def write() -> None:
        with open(path, "wb") as f:
            for a in arrays:
                f.write(np.ascontiguousarray(a).data.cast("B"))
            if fsync:
                f.flush()
                os.fsync(f.fileno())

    def read() -> None:
        with open(path, "rb") as f:
            for a in arrays:
                buf = np.empty(a.shape, a.dtype)
                f.readinto(buf.data.cast("B"))

    return _timed(write), _timed(read)


def run(quick: bool) -> dict[str, Any]:
    """Time every writer ``repeats`` times; a result dict (see :mod:`bench.harness`)."""
    import jax
    import orbax.checkpoint as ocp

    import zoo_train

    result = new_result(NAME, TITLE, quick)
    repeats = 2 if quick else 3
    state, label = _state(quick)
    leaves, _ = zoo_train.state_leaves(state)
    nbytes = sum(x.nbytes for x in leaves)
    root = pathlib.Path(tempfile.mkdtemp(prefix="zoo-bench-ckpt-"))
    times: dict[str, list[tuple[float, float]]] = {}
    try:
        ckpt = zoo_train.Checkpointer(root / "zoo", keep=1, async_save=True)
        zoo_times = []
        for i in range(repeats):

            def save_zoo(i: int = i) -> None:
                ckpt.save(i, state, {})
                ckpt.wait()

            def restore_zoo() -> None:
                restored = ckpt.restore(state)
                assert restored is not None  # saved just before
                jax.block_until_ready(restored.state)

            save, restore = _timed(save_zoo), _timed(restore_zoo)
            zoo_times.append((save, restore))
        ckpt.close()
        times["zoo_train.Checkpointer"] = zoo_times

        std = ocp.StandardCheckpointer()
        tree = {f"a{i:05d}": x for i, x in enumerate(leaves)}
        abstract = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree
        )
        orbax_times = []
        for i in range(repeats):
            path = root / "orbax" / str(i)
            save = _timed(lambda path=path: (std.save(path, tree), std.wait_until_finished()))
            restore = _timed(lambda path=path: jax.block_until_ready(std.restore(path, abstract)))
            orbax_times.append((save, restore))
        std.close()
        times["orbax StandardCheckpointer"] = orbax_times

        times["plain write/read"] = [_plain(leaves, root, fsync=False) for _ in range(repeats)]
        times["plain write+fsync/read"] = [_plain(leaves, root, fsync=True) for _ in range(repeats)]
    finally:
        shutil.rmtree(root, ignore_errors=True)

    rows, summary = [], {}
    for method, pairs in times.items():
        save_s = median([p[0] for p in pairs])
        restore_s = median([p[1] for p in pairs])
        summary[method] = {
            "save_s": save_s,
            "restore_s": restore_s,
            "save_gib_per_s": nbytes / save_s / 2**30,
            "restore_gib_per_s": nbytes / restore_s / 2**30,
        }
        rows.append(
            [
                method,
                f"{save_s:.2f}",
                f"{nbytes / save_s / 2**30:.2f}",
                f"{restore_s:.2f}",
                f"{nbytes / restore_s / 2**30:.2f}",
            ]
        )
    result["data"] = {
        "state": label,
        "bytes": nbytes,
        "arrays": len(leaves),
        "times_s": times,
        "summary": summary,
    }
    result["tables"].append(
        table(
            f"Checkpoint I/O, {label} train state ({nbytes / 2**30:.2f} GiB in {len(leaves)} arrays), median of {repeats}",
            ["method", "save s", "save GiB/s", "restore s", "restore GiB/s"],
            rows,
            [
                "zoo_train.Checkpointer save includes copying the live buffers and computing a "
                "checksum per array; its restore verifies those checksums.",
                "Reads follow writes, so restores may be served from the page cache (for every method alike).",
            ],
        )
    )
    return result


def plot(result: dict[str, Any], directory: pathlib.Path) -> list[str]:
    """Save and restore GiB/s per method."""
    summary = result["data"]["summary"]
    fig, ax = figure(figsize=(7, 3.6))
    xs = range(len(summary))
    for shift, what in ((-0.2, "save"), (0.2, "restore")):
        rates = [s[f"{what}_gib_per_s"] for s in summary.values()]
        ax.bar([x + shift for x in xs], rates, 0.4, label=what)
    ax.set_xticks(list(xs), [m.replace(" ", "\n", 1) for m in summary], fontsize=7)
    ax.set_ylabel("GiB / s")
    ax.legend(fontsize=8)
    data = result["data"]
    ax.set_title(f"checkpoint I/O ({data['state']}, {data['bytes'] / 2**30:.2f} GiB)", fontsize=9)
    return [save_figure(fig, directory / "checkpoint.png")]
