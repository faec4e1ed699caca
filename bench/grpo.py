"""GRPO's step, split: sampling (zoo's KV-cache generation from the trained parameters),
reward (decoding and the reward functions), scoring (the batch placed, with the reference's
log-probabilities) and update (the train step); and rollout tokens per second against
``transformers``' ``generate`` on the same model and batch, on the CPU.

A Llama of 4 layers, width 256 (the tiny test tokenizer's vocabulary, 512 positions) is saved as
a Hugging Face directory; zoo loads it in float32 and fine-tunes it fully with GRPO (β > 0, the
reference computed once per batch) for a few steps on prompts of the tokenizer's words, with a
cheap reward. Every completion is sampled to its full length (no stop token) in both
libraries, at temperature 1, so they generate the same number of tokens. The first step
compiles; the split and the rates are medians over the later steps, and compilations after the
first step are counted (the sampler and the step must compile once).
"""

from __future__ import annotations

import pathlib
import tempfile
import time
from typing import Any

from .harness import llama_checkpoint, median, new_result, table, target, unavailable

NAME = "grpo"
TITLE = "GRPO step split and rollout tokens/s: zoo against transformers' generate (CPU)"
PHASES = ("sampling", "reward", "scoring", "update")
SHAPE = dict(
    hidden_size=256,
    intermediate_size=688,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
)


def _word_share(prompts: list[Any], completions: list[str], **columns: Any) -> list[float | None]:
    return [sum(w == "alpha" for w in c.split()) / max(len(c.split()), 1) for c in completions]


def _hf_generate(model_dir: pathlib.Path, setup: dict[str, Any], rows: int) -> Any:
    """A function timing one ``generate`` on a batch of the same shape: prompts of the same
    width, every completion to its full length."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 256, (rows, setup["prompt_tokens"]), generator=gen)
    mask = torch.ones_like(ids)

    def timed() -> float:
        started = time.perf_counter()
        with torch.no_grad():
            model.generate(
                ids,
                attention_mask=mask,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                max_new_tokens=setup["new_tokens"],
                min_new_tokens=setup["new_tokens"],
                pad_token_id=0,
            )
        return time.perf_counter() - started

    return timed


def _steps(model_dir: pathlib.Path, setup: dict[str, Any]) -> dict[str, Any]:
    """Each zoo step's phases in seconds and compilations, and ``transformers``' generation
    seconds on a batch of the same shape, measured first (torch slows down by an order of
    magnitude when it runs after XLA's CPU threads in one process)."""
    import jax
    import numpy as np

    import zoo_models
    import zoo_train
    from zoo_train.grpo import GRPOConfig, Prompt, Rewards, grpo_parts
    from zoo_train.parallel import BatchLayout, init_sharded, make_mesh, make_rules
    from zoo_train.testing import WORDS

    rows = setup["prompts_per_step"] * setup["num_generations"]
    hf = _hf_generate(model_dir, setup, rows)
    hf_seconds = [hf() for _ in range(setup["steps"])]  # the first warms up, as zoo's compiles
    model = zoo_models.load_hf(model_dir, dtype="float32", attention_implementation="xla")
    tokenizer = zoo_models.load_tokenizer(model_dir)
    rng = np.random.default_rng(0)
    prompts = [
        Prompt(tuple(tokenizer.encode(" ".join(rng.choice(WORDS, 6)))), f"p{i}", {})
        for i in range(setup["prompts"])
    ]
    grpo = GRPOConfig(
        num_generations=setup["num_generations"],
        beta=0.04,
        max_completion_length=setup["new_tokens"],
    )
    config = zoo_train.TrainConfig(
        steps=setup["steps"], batch_size=rows, progress=False, plot=False,
        optimizer=zoo_train.OptimizerConfig(lr=1e-4),
    )  # fmt: skip
    mesh, rules = make_mesh(config.mesh), make_rules(config.sharding)
    source, rollout, loss = grpo_parts(
        prompts, Rewards(("word_share",), (_word_share,), (1.0,)), tokenizer, grpo=grpo,
        config=config, max_prompt_length=setup["prompt_tokens"], stop_tokens=(),
        reference="batch", reference_model=model, mesh=mesh,
    )  # fmt: skip
    trainer = zoo_train.Trainer(config, model, loss, mesh=mesh)
    state = init_sharded(trainer.plan.fresh, model, mesh=mesh, shardings=trainer.plan.shardings)
    layout = BatchLayout(mesh, rules, rows)
    compiles: list[str] = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, *a, **k: compiles.append(event) if "backend_compile" in event else None
    )
    steps = []
    for step in range(1, setup["steps"] + 1):
        counted = len(compiles)
        batch = rollout(state.model, step, layout.place(source.next_batch(rows)))
        started = time.perf_counter()
        state, _ = trainer.train_step(batch, state)
        jax.block_until_ready(state)
        update = time.perf_counter() - started
        compiled = len(compiles) - counted
        steps.append({**rollout.timings, "update": update, "compiles": compiled})
    for measured, seconds in zip(steps, hf_seconds, strict=True):
        measured["hf"] = seconds
    return {"steps": steps, "rows": rows}


def measure(quick: bool) -> dict[str, Any]:
    """The step phases of zoo's GRPO and transformers' ``generate`` seconds."""
    setup = {
        "prompts": 32,
        "prompts_per_step": 4,
        "num_generations": 4,
        "prompt_tokens": 16,
        "new_tokens": 32 if quick else 64,
        "steps": 4 if quick else 10,
    }
    with tempfile.TemporaryDirectory(prefix="zoo-bench-grpo-") as scratch:
        measured = _steps(llama_checkpoint(pathlib.Path(scratch) / "hf", SHAPE), setup)
    return {"setup": setup, "shape": SHAPE, **measured}


def run(quick: bool) -> dict[str, Any]:
    """The measurement; a result dict (see :mod:`bench.harness`)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        return unavailable(NAME, TITLE, quick, f"needs torch and transformers ({e})")
    result = new_result(NAME, TITLE, quick)
    result["data"] = measure(quick)
    return report(result)


def report(result: dict[str, Any]) -> dict[str, Any]:
    """Tables and targets from the stored numbers."""
    data = result["data"]
    setup, steps, rows = data["setup"], data["steps"], data["rows"]
    later = steps[1:]
    phase = {p: median([s[p] for s in later]) for p in PHASES}
    total = sum(phase.values())
    first = sum(steps[0][p] for p in PHASES)
    phase_rows = [[p, f"{phase[p] * 1e3:.1f}", f"{phase[p] / total:.0%}"] for p in PHASES]
    phase_rows.append(["step", f"{total * 1e3:.1f}", "100%"])
    tokens = rows * setup["new_tokens"]
    zoo_rate, hf_rate = tokens / phase["sampling"], tokens / median([s["hf"] for s in later])
    ratio = zoo_rate / hf_rate
    recompiles = sum(s["compiles"] for s in later)
    shape = data["shape"]
    note = (
        f"Llama, {shape['num_hidden_layers']} layers, width {shape['hidden_size']}, vocabulary "
        f"256, float32, full fine-tuning with beta 0.04 (reference once per batch); "
        f"{setup['prompts_per_step']} prompts x {setup['num_generations']} completions = {rows} "
        f"rows of {setup['prompt_tokens']} prompt + {setup['new_tokens']} new tokens; medians of "
        f"steps 2-{len(steps)} (and of as many transformers generations after a first, run "
        f"before zoo's); the first step (compilation included) took {first:.1f} s."
    )
    result["tables"] = [
        table(
            "A GRPO step's time by phase (after the first step)",
            ["phase", "ms", "share"],
            phase_rows,
            [note],
        ),
        table(
            "Rollout tokens per second (sampling, same model and batch)",
            ["library", "tokens/s", "zoo / transformers"],
            [
                ["zoo (KV cache, one jitted loop)", f"{zoo_rate:,.0f}", f"{ratio:.2f}x"],
                ["transformers generate (eager)", f"{hf_rate:,.0f}", ""],
            ],
        ),
    ]
    result["targets"] = [
        target(
            "zoo's sampling >= 1.0x transformers' generate in tokens/s",
            f"{ratio:.2f}x",
            ratio >= 1.0,
        ),
        target(
            "no compilation after the first step", f"{recompiles} compilations", recompiles == 0
        ),
    ]
    return result
