"""The training loop's overhead: ``zoo_train.train`` against a bare loop over the same step.

Both run in one worker process, alternated A B A B: ``train`` as ``zoo train`` runs it
(prefetch thread, metrics read a few steps late, progress bar, metric records, the default
trackers writing TensorBoard event files from their own thread), and a plain
Python loop calling the same compiled train step on batches already on the device. The
overhead is the ratio of their median steady-state step times, at the small config and at a
config whose step takes under 10 ms, where a per-step host cost would show most.
"""

from __future__ import annotations

from typing import Any

from .harness import Worker, median, new_result, table, target

NAME = "loop"
TITLE = "Training loop overhead: zoo_train.train vs a bare loop over the same step (CPU)"
TARGET = 0.02
THREADS = {"OMP_NUM_THREADS": "2"}


def cases(quick: bool) -> list[dict[str, Any]]:
    small: dict[str, Any] = {
        "name": "small (4L, d=256, byte vocab)",
        "model": {"d_model": 256, "n_layers": 4, "n_heads": 4, "n_kv_heads": 4,
                  "mlp_hidden": 1024, "vocab_size": 256, "max_position": 256},
        "batch": 8, "seq_len": 256, "chunk": 5, "rounds": 5,
    }  # fmt: skip
    tiny: dict[str, Any] = {
        "name": "tiny (2L, d=64): step under 10 ms",
        "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
                  "mlp_hidden": 128, "vocab_size": 256, "max_position": 64},
        "batch": 4, "seq_len": 64, "chunk": 50, "rounds": 9,
    }  # fmt: skip
    if quick:
        small.update(chunk=2, rounds=1, model={**small["model"], "n_layers": 2})
        tiny.update(chunk=20, rounds=2)
    return [tiny, small]


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    times: dict[str, list[float]] = {"loop": [], "bare": []}
    ratios = []
    with Worker("bench.loop_worker", case, env=THREADS) as worker:
        for _ in range(case["rounds"]):
            got = {}
            for side in ("loop", "bare"):  # A B A B
                got[side] = worker.ask(side, chunks=3)["step_s"]
                times[side] += got[side]
            # Paired within a round: the machine's speed drifts over minutes on a shared host,
            # by more than the overhead measured.
            ratios.append(median(got["loop"]) / median(got["bare"]))
        host = worker.ask("host", steps=1000)
    loop, bare = median(times["loop"]), median(times["bare"])
    return {
        "case": case, "times_s": times, "loop_s": loop, "bare_s": bare, "round_ratios": ratios,
        "host": host,
    }  # fmt: skip


def run(quick: bool) -> dict[str, Any]:
    rows_out = [run_case(c) for c in cases(quick)]
    result = new_result(NAME, TITLE, quick)
    result["data"] = {"rows": rows_out}
    rows = []
    for r in rows_out:
        overhead = median(r["round_ratios"]) - 1
        lo, hi = min(r["round_ratios"]) - 1, max(r["round_ratios"]) - 1
        rows.append(
            [
                r["case"]["name"],
                f"{r['bare_s'] * 1e3:.2f}",
                f"{r['loop_s'] * 1e3:.2f}",
                f"{overhead * 100:+.1f}%",
                f"{lo * 100:+.1f}% … {hi * 100:+.1f}%",
                str(len(r["round_ratios"])),
            ]
        )
        result["targets"].append(
            target(
                f"loop overhead within {TARGET:.0%}: {r['case']['name']}",
                f"{overhead * 100:+.1f}%",
                overhead <= TARGET,
            )
        )
    result["tables"].append(
        table(
            "Host time the loop adds per step, measured alone (no device work, no noise from it)",
            ["config", "batch: make and place µs", "metrics path µs", "share of the bare step"],
            [
                [
                    r["case"]["name"],
                    f"{r['host']['batch_s'] * 1e6:.1f}",
                    f"{r['host']['metrics_s'] * 1e6:.1f}",
                    f"{(r['host']['batch_s'] + r['host']['metrics_s']) / r['bare_s']:.2%}",
                ]
                for r in rows_out
            ],
            [
                "Each part timed over 1,000 steps in one go. The batch "
                "is made in the prefetch thread, so on an accelerator it overlaps the device; on "
                "a 2-core CPU it takes cycles from XLA's compute threads. The metrics path: the "
                "wait for a finished step (metrics already ready here), the reads at records, "
                "the progress bar and the records (handed to the trackers' thread, which writes "
                "TensorBoard event files meanwhile).",
            ],
        )
    )
    result["tables"].append(
        table(
            "Steady-state step time: the training loop against a bare loop",
            ["config", "bare loop ms", "zoo_train.train ms", "overhead", "rounds range", "rounds"],
            rows,
            [
                "Step times: medians of chunks of steps after compilation. Overhead: the median "
                "over rounds of (loop / bare) within a round, the two sides alternated in one "
                "process. The loop includes its prefetch thread, metric reads at records, "
                "progress bar, records and the default trackers (TensorBoard event files, "
                "written from their own thread), not the final checkpoint. AdamW, float32, 1 CPU "
                "device.",
                "The bare loop queues a whole chunk of steps without waiting; the loop keeps two "
                "in flight and sleeps on the oldest. On this 2-core host the bare loop's "
                "dispatching thread competes with XLA's compute threads, so the loop can come "
                "out faster (a negative overhead).",
            ],
        )
    )
    return result
