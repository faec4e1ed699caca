"""Fused cross entropy on CPU: a GPT-2 124M train step with the loss through
``fused_xla`` against the same step through ``logits`` (the unfused loss), side by side.

Each side runs in a process of its own (``bench/cross_entropy_worker.py``, ``ZOO_CROSS_ENTROPY``
set), so its peak resident set is its own; the steps alternate between them (A B A B) so a
loaded machine slows both alike. Reported per side: the compiled step's temporaries (XLA's
memory analysis), the peak RSS, the losses of the same 5 batches and the median tokens/s.
"""

from __future__ import annotations

from typing import Any

from .harness import Worker, fmt, median, new_result, table, target

NAME = "cross_entropy"
TITLE = "Fused cross entropy: GPT-2 124M train step, fused_xla against the logits (CPU, float32)"
SIDES = ("fused_xla", "logits")
GPT2 = {"n_layer": 12, "n_embd": 768, "n_head": 12, "n_positions": 1024, "vocab_size": 50257}
STEPS = 5
LOSS_RTOL = 1e-6
#: The RSS saving asked for, as a share of one batch's float32 logits.
SAVING_SHARE = 0.75
#: Tokens/s "no worse": within the run-to-run spread of the median step on this machine.
SPEED_SHARE = 0.97


def _setup(quick: bool) -> dict[str, Any]:
    return {"arch": GPT2, "batch": 1 if quick else 2, "seq_len": 512 if quick else 1024,
            "steps": STEPS, "seed": 0}  # fmt: skip


def run(quick: bool) -> dict[str, Any]:
    """Both sides, steps interleaved; a result dict (see :mod:`bench.harness`)."""
    setup = _setup(quick)
    workers = {
        side: Worker("bench.cross_entropy_worker", setup, env={"ZOO_CROSS_ENTROPY": side})
        for side in SIDES
    }
    try:
        hello = {side: w.hello for side, w in workers.items()}
        steps: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        for _ in range(STEPS):
            for side, w in workers.items():
                steps[side].append(w.ask("step"))
        rss = {side: w.ask("rss")["peak_rss"] for side, w in workers.items()}
    finally:
        for w in workers.values():
            w.close()
    result = new_result(NAME, TITLE, quick)
    result["data"] = {"setup": setup, "hello": hello, "steps": steps, "rss": rss}
    return report(result)


def report(result: dict[str, Any]) -> dict[str, Any]:
    """Tables and targets from the stored numbers."""
    data = result["data"]
    setup, hello, steps, rss = data["setup"], data["hello"], data["steps"], data["rss"]
    tokens = setup["batch"] * setup["seq_len"]
    logits_bytes = tokens * setup["arch"]["vocab_size"] * 4
    # The first step of each side runs on warm caches only after the other's: time the rest.
    speed = {s: tokens / median([x["seconds"] for x in steps[s][1:]]) for s in SIDES}
    losses = {s: [x["loss"] for x in steps[s]] for s in SIDES}
    mib = 2**20
    rows = [
        [side, ", ".join(hello[side]["kernel"]) or "-", fmt(hello[side]["temp_bytes"] / mib),
         fmt(rss[side] / mib), fmt(speed[side]), " ".join(f"{v:.6f}" for v in losses[side])]
        for side in SIDES
    ]  # fmt: skip
    saved = rss["logits"] - rss["fused_xla"]
    worst = max(
        abs(a - b) / abs(b) for a, b in zip(losses["fused_xla"], losses["logits"], strict=True)
    )
    shape = (
        f"GPT-2 124M (vocabulary {setup['arch']['vocab_size']:,}), batch {setup['batch']} x "
        f"{setup['seq_len']} tokens, AdamW, float32, one CPU process per side; a batch's float32 "
        f"logits are {logits_bytes / mib:,.0f} MiB."
    )
    result["tables"] = [
        table(
            "One train step per side: compiled temporaries, peak RSS, speed, the same 5 batches' losses",
            ["ZOO_CROSS_ENTROPY", "kernel", "temporaries MiB", "peak RSS MiB", "tokens/s",
             "losses"],
            rows,
            [shape],
        )
    ]  # fmt: skip
    result["targets"] = [
        target(
            f"peak RSS lower by about a batch's logits (at least {SAVING_SHARE:.0%} of "
            f"{logits_bytes / mib:,.0f} MiB)",
            f"{saved / mib:,.0f} MiB lower ({saved / logits_bytes:.2f}x the logits)",
            saved >= SAVING_SHARE * logits_bytes,
        ),
        target(
            f"losses equal to {LOSS_RTOL:g} relative over {STEPS} steps",
            f"largest relative difference {worst:.1e}",
            worst <= LOSS_RTOL,
        ),
        target(
            f"tokens/s no worse (at least {SPEED_SHARE:.0%} of the unfused step's)",
            f"{speed['fused_xla'] / speed['logits']:.3f}x",
            speed["fused_xla"] >= SPEED_SHARE * speed["logits"],
        ),
    ]
    return result
