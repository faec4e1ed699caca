"""GRPO against independent references: TRL 1.16's own ``GRPOTrainer._compute_loss`` on the
same fixed log-probabilities and advantages (loss, gradients and metrics), a float64 numpy
reference of the advantages, the zero loss of an on-policy first step, and reward functions
that misbehave."""

from __future__ import annotations

import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_train.grpo import (
    GRPOConfig,
    RewardError,
    Rewards,
    combined_rewards,
    group_advantages,
    policy_objective,
)


def _trl_loss(config: GRPOConfig, logps, advantages, mask, old_logps, ref_logps):
    """TRL's loss of ``config`` on fixed per-token log-probabilities: the trainer's own
    ``_compute_loss`` with the model's forward pass replaced by the given values. Returns the
    loss, its gradient with respect to ``logps`` and TRL's logged metrics."""
    import torch
    from trl import GRPOTrainer

    logps_t = torch.tensor(np.asarray(logps), dtype=torch.float32, requires_grad=True)
    mask_t = torch.tensor(np.asarray(mask), dtype=torch.float32)
    metrics: dict = {"train": {}}
    fake = types.SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (
            logps_t,
            torch.zeros_like(logps_t),
            None,
        ),
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level="token",
        beta=config.beta,
        args=types.SimpleNamespace(
            use_bias_correction_kl=False, delta=None, steps_per_generation=1
        ),
        loss_type=config.loss_type,
        epsilon_low=config.epsilon,
        epsilon_high=config.epsilon_high,
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        model=types.SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1,
        max_completion_length=config.max_completion_length,
        accelerator=types.SimpleNamespace(
            num_processes=1, gather=lambda x: x, reduce=lambda x, reduction: x
        ),
        _entropy_bonus_enabled=False,
        aux_loss_enabled=False,
        _metrics=metrics,
    )
    metrics["train"] = _AppendDict()
    rows, width = np.asarray(mask).shape
    inputs = {
        "prompt_ids": torch.zeros((rows, 1), dtype=torch.long),
        "prompt_mask": torch.ones((rows, 1), dtype=torch.long),
        "completion_ids": torch.zeros((rows, width), dtype=torch.long),
        "completion_mask": mask_t,
        "advantages": torch.tensor(np.asarray(advantages), dtype=torch.float32),
        "num_items_in_batch": mask_t.sum(),
    }
    if old_logps is not None:
        inputs["old_per_token_logps"] = torch.tensor(np.asarray(old_logps), dtype=torch.float32)
    if ref_logps is not None:
        inputs["ref_per_token_logps"] = torch.tensor(np.asarray(ref_logps), dtype=torch.float32)
    loss = GRPOTrainer._compute_loss(fake, None, inputs)
    loss.backward()
    return (
        float(loss.detach()),
        logps_t.grad.numpy(),
        {k: v[0] for k, v in metrics["train"].items()},
    )


class _AppendDict(dict):
    def __missing__(self, key):
        self[key] = []
        return self[key]


def _draw(rng: np.random.Generator, rows: int, width: int):
    lengths = rng.integers(1, width + 1, rows)
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.float32)
    logps = (-rng.uniform(0.05, 3.0, (rows, width))).astype(np.float32)
    # Ratios far enough from 1 that both clipping sides are reached.
    old = (logps + rng.normal(0, 0.4, (rows, width))).astype(np.float32)
    ref = (logps + rng.normal(0, 0.5, (rows, width))).astype(np.float32)
    adv = rng.normal(0, 1, rows).astype(np.float32)
    return logps * mask, adv, mask, old * mask, ref * mask


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("on_policy", [True, False])
def test_loss_gradients_and_metrics_equal_trl(loss_type, beta, on_policy):
    rng = np.random.default_rng()
    config = GRPOConfig(
        loss_type=loss_type, beta=beta, epsilon=0.2, epsilon_high=0.28, max_completion_length=7
    )
    logps, adv, mask, old, ref = _draw(rng, 6, 7)
    old_used = None if on_policy else old
    ref_used = ref if beta > 0 else None
    want, want_grad, want_metrics = _trl_loss(config, logps, adv, mask, old_used, ref_used)

    def ours(lp):
        loss_sum, weight, stats = policy_objective(
            config, lp * mask, jnp.asarray(adv), jnp.asarray(mask),
            old_logps=None if old_used is None else jnp.asarray(old_used),
            ref_logps=None if ref_used is None else jnp.asarray(ref_used),
        )  # fmt: skip
        return loss_sum / weight, stats

    (loss, stats), grad = jax.value_and_grad(ours, has_aux=True)(jnp.asarray(logps))
    np.testing.assert_allclose(float(loss), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-4, atol=1e-7)
    for name, values in stats.items():
        got = float(jnp.sum(values * mask) / jnp.sum(mask))
        np.testing.assert_allclose(got, want_metrics[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert ("kl" in stats) == (beta > 0)


def _advantages_float64(rewards: np.ndarray, g: int, scale: str) -> np.ndarray:
    """Each reward minus its group's mean over the scored rewards, over (sample std with
    ddof 1) + 1e-4; 0 for an unscored one; plain loops in float64."""
    out = np.zeros(len(rewards))
    scored_all = [r for r in rewards if not math.isnan(r)]
    batch_std = float(np.std(scored_all, ddof=1)) if len(scored_all) > 1 else math.nan
    for start in range(0, len(rewards), g):
        group = rewards[start : start + g]
        scored = [r for r in group if not math.isnan(r)]
        mean = sum(scored) / len(scored) if scored else math.nan
        std = float(np.std(scored, ddof=1)) if len(scored) > 1 else math.nan
        scale_by = {"group": std, "batch": batch_std, "none": None}[scale]
        for i, r in enumerate(group):
            a = r - mean
            if scale_by is not None:
                a = a / (scale_by + 1e-4)
            out[start + i] = 0.0 if math.isnan(a) else a
    return out


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_advantages_equal_a_float64_reference_with_equal_and_unscored_groups(scale):
    rng = np.random.default_rng()
    g = 4
    rewards = rng.normal(0, 2, 5 * g)
    rewards[g : 2 * g] = rng.normal()  # a group whose rewards are all equal
    rewards[2 * g + 1] = np.nan  # a completion no function scored
    rewards[3 * g : 4 * g] = np.nan  # a group none of whose completions was scored
    got, _ = group_advantages(rewards, g, scale)
    want = _advantages_float64(rewards, g, scale)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    if scale != "batch":
        assert np.all(got[g : 2 * g] == 0.0)


def test_combined_rewards_weigh_functions_and_skip_none():
    per_function = np.array([[1.0, np.nan], [np.nan, np.nan], [0.5, 2.0]])
    got = combined_rewards(per_function, np.array([2.0, -1.0]))
    np.testing.assert_array_equal(np.isnan(got), [False, True, False])
    np.testing.assert_allclose(got[[0, 2]], [2.0, 1.0 - 2.0])


def test_rewards_that_misbehave_stop_with_a_sentence_naming_function_and_row(tmp_path):
    source = tmp_path / "my_rewards.py"
    source.write_text(
        "def short(prompts, completions, **kw):\n    return [1.0] * (len(completions) - 1)\n"
        "def nan_at_2(prompts, completions, **kw):\n"
        "    return [float('nan') if i == 2 else 0.0 for i in range(len(completions))]\n"
        "def text_at_1(prompts, completions, **kw):\n"
        "    return ['x' if i == 1 else 0.0 for i in range(len(completions))]\n"
        "def boom(prompts, completions, **kw):\n    raise KeyError('answer')\n"
        "def fine(prompts, completions, answer, **kw):\n"
        "    return [float(c == a) if a else None for c, a in zip(completions, answer)]\n"
    )
    prompts, completions = ["p"] * 4, ["a", "b", "c", "d"]
    columns = {"answer": ["a", "x", None, "d"]}
    expected = {
        "short": r"short returned 3 rewards for 4 completions",
        "nan_at_2": r"nan_at_2 returned nan for row 12\.",
        "text_at_1": r"text_at_1 returned 'x' for row 11, not a number",
        "boom": r"boom raised KeyError: 'answer' \(on rows 10 to 13\)",
    }
    for name, message in expected.items():
        rewards = Rewards.load([f"{source}:{name}"])
        with pytest.raises(RewardError, match=message):
            rewards.score(prompts, completions, columns, offset=10)
    scored = Rewards.load([f"{source}:fine", "length_penalty"]).score(prompts, completions, columns)
    np.testing.assert_array_equal(scored[:, 0], [1.0, 0.0, np.nan, 1.0])
    np.testing.assert_array_equal(scored[:, 1], [0.0] * 4)
    with pytest.raises(ValueError, match="no function missing"):
        Rewards.load([f"{source}:missing"])
    with pytest.raises(ValueError, match="neither a built-in"):
        Rewards.load(["nothing_like_this"])
    with pytest.raises(ValueError, match="2 weights for 1 reward"):
        Rewards.load(["length_penalty"], [1.0, 2.0])
    assert Rewards.load(["json:dumps"]).names == ("dumps",)


def test_builtin_rewards_follow_their_definitions():
    rewards = Rewards.load(["answer_match", "format_match", "length_penalty"])
    completions = [
        "<think>2+2</think> <answer>#### 4</answer>",
        "so #### 1,234.",
        "x" * 1500,
        [{"role": "assistant", "content": "#### 7"}],
    ]
    scored = rewards.score(["q"] * 4, completions, {"answer": ["4</answer>", "1234", "1", 7]})
    np.testing.assert_array_equal(scored[:, 0], [1.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(scored[:, 1], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(scored[:, 2], [0.0, 0.0, -0.5, 0.0])


def test_prompts_come_from_any_record_input_with_their_columns(tmp_path):
    """JSON lines (plain and gzipped), Parquet and Arrow give the same prompts and columns,
    tokenized as the tokenizer encodes them; a plain-text file has no fields and is refused."""
    import gzip
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from zoo_data import byte_tokenizer
    from zoo_train.grpo import read_prompts

    rng = np.random.default_rng()
    words = ["alpha", "beta", "gamma", "delta", "épsilon"]
    rows = [
        {"prompt": " ".join(rng.choice(words, int(rng.integers(1, 5)))), "answer": str(i)}
        for i in range(int(rng.integers(3, 9)))
    ]
    lines = "".join(json.dumps(r) + "\n" for r in rows)
    (tmp_path / "p.jsonl").write_text(lines)
    (tmp_path / "p.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, tmp_path / "p.parquet")
    with pa.ipc.new_file(tmp_path / "p.arrow", table.schema) as writer:
        writer.write_table(table)
    tok = byte_tokenizer()
    want = [(tuple(tok.encode(r["prompt"])), r["prompt"], {"answer": r["answer"]}) for r in rows]
    for name in ("p.jsonl", "p.jsonl.gz", "p.parquet", "p.arrow"):
        got = read_prompts(tmp_path / name, tok, max_prompt_length=64)
        assert [(p.ids, p.shown, p.columns) for p in got] == want, name
    both = read_prompts([tmp_path / "p.parquet", tmp_path / "p.jsonl"], tok, max_prompt_length=64)
    assert len(both) == 2 * len(rows)
    (tmp_path / "p.txt").write_text(rows[0]["prompt"])
    with pytest.raises(ValueError, match="plain text, which has no fields"):
        read_prompts(tmp_path / "p.txt", tok, max_prompt_length=64)
