"""Memory soak: host RSS and live device buffers over thousands of steps of a tiny model.

A slow leak once cost 40% over budget. This runs ``zoo_train.train`` on a tiny Llama (one
layer, width 32) with ``make train``'s data settings (the 3 MB standard-library corpus in a token
store, byte tokens, batch 16 × 128, so a new epoch every ~1,400 steps) for 12,000 steps (quick: 600), with
a save and an evaluation every 250 steps, in a process of its own (``python -m bench.soak
CONFIG``) whose malloc arenas are capped as ``zoo`` caps them. It samples at every train record
the process's RSS and ``jax.live_arrays()`` (count and bytes). After a warm-up (the first fifth
of the steps: compilation, allocator growth) a least-squares line through the samples gives the
slope per 1,000 steps; the target is no growth beyond noise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from .harness import new_result, slope, table, target

NAME = "soak"
TITLE = "Memory soak: RSS and live buffers over thousands of steps"
_EVERY = 250  # steps between saves and between evaluations
_NOISE_MIB = 1.0  # per 1,000 steps: below this, flat


def _worker(config: dict[str, Any]) -> None:
    """The soak itself (in its own process): prints one JSON line of samples."""
    import jax
    import psutil

    import zoo_models
    import zoo_train
    from zoo_train.data import StoreLoader, byte_tokenizer, prepare_store, stdlib_files

    zoo_train.cap_malloc_arenas()
    model_config = zoo_models.get("llama-tiny").replace(
        n_layers=1, d_model=32, mlp_hidden=64, vocab_size=byte_tokenizer().vocab_size,
        max_position=128,
    )  # fmt: skip
    proc = psutil.Process()
    samples: list[list[float]] = []

    def sample(record: dict[str, Any]) -> None:
        if "loss" in record and "event" not in record:
            arrays = jax.live_arrays()
            samples.append(
                [
                    record["step"],
                    proc.memory_info().rss,
                    len(arrays),
                    sum(a.nbytes for a in arrays),
                ]
            )

    steps = config["steps"]
    train_config = zoo_train.TrainConfig(
        steps=steps,
        batch_size=16,
        log_every=config["log_every"],
        eval_every=_EVERY,
        eval_batches=4,
        checkpoint_every=_EVERY,
        keep=2,
        progress=False,
        plot=False,
    )
    with tempfile.TemporaryDirectory(prefix="zoo-soak-") as out:
        # make train's data: the stdlib corpus as a token store, read as windows of rows
        files = [str(f) for f in stdlib_files(max_bytes=3_000_000)]
        prepare_store(files, f"{out}/data", workers=1, progress=False)
        train = StoreLoader(f"{out}/data", seq_len=128, seed=0)
        val = train.held_out()
        trainer = zoo_train.Trainer(
            train_config,
            lambda: zoo_models.build(model_config, key=jax.random.key(0)),
            None,
            f"{out}/run",
        )
        trainer.train(train, val, on_record=sample)
    print(json.dumps({"samples": samples}), flush=True)


def run(quick: bool) -> dict[str, Any]:
    """Run the soak in a subprocess; a result dict (see :mod:`bench.harness`)."""
    steps = 600 if quick else 12_000
    config = {"steps": steps, "log_every": 10 if quick else 50}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.soak", json.dumps(config)],
        capture_output=True,
        text=True,
        env={**os.environ, "ZOO_ATTENTION": os.environ.get("ZOO_ATTENTION", "xla")},
        check=True,
    )
    samples = json.loads(proc.stdout.strip().splitlines()[-1])["samples"]
    result = new_result(NAME, TITLE, quick)
    warm = [s for s in samples if s[0] > steps // 5]
    steps_k = [s[0] / 1000 for s in warm]
    rss_slope = slope(steps_k, [s[1] / 2**20 for s in warm])
    count_slope = slope(steps_k, [float(s[2]) for s in warm])
    bytes_slope = slope(steps_k, [s[3] / 2**20 for s in warm])
    first, last = warm[0], warm[-1]
    result["tables"].append(
        table(
            f"{steps:,} steps, a save and an evaluation every {_EVERY} (after {steps // 5:,} "
            "steps of warm-up)",
            ["measure", f"at step {first[0]}", f"at step {last[0]}", "slope per 1,000 steps"],
            [
                [
                    "host RSS (MiB)",
                    f"{first[1] / 2**20:.1f}",
                    f"{last[1] / 2**20:.1f}",
                    f"{rss_slope:+.2f} MiB",
                ],
                ["live device arrays", f"{first[2]}", f"{last[2]}", f"{count_slope:+.2f}"],
                [
                    "live device bytes (MiB)",
                    f"{first[3] / 2**20:.3f}",
                    f"{last[3] / 2**20:.3f}",
                    f"{bytes_slope:+.4f} MiB",
                ],
            ],
        )
    )
    result["targets"].append(
        target(
            f"RSS flat after warm-up (slope under {_NOISE_MIB} MiB per 1,000 steps)",
            f"{rss_slope:+.2f} MiB per 1,000 steps",
            abs(rss_slope) < _NOISE_MIB,
        )
    )
    result["targets"].append(
        target(
            "live device buffers flat (no growth per 1,000 steps)",
            f"{count_slope:+.2f} arrays, {bytes_slope:+.4f} MiB per 1,000 steps",
            abs(count_slope) < 1.0,
        )
    )
    result["data"] = {
        "samples": samples,
        "rss_mib_per_1000_steps": rss_slope,
        "live_arrays_per_1000_steps": count_slope,
        "live_mib_per_1000_steps": bytes_slope,
    }
    return result


if __name__ == "__main__":
    _worker(json.loads(sys.argv[1]))
