"""Preference tuning (DPO, IPO, SimPO, ORPO) on packed pairs, against independent computations:
TRL's DPOTrainer on the same tiny model and data (DPO, IPO), the papers' formulas in float64 over
`transformers`' log-probabilities (SimPO, ORPO), plain one-pair-per-row batches (packing), and
the command line end to end."""

from __future__ import annotations

import contextlib
import io
import json
import math
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_models
from zoo_train.cli import main
from zoo_train.data import TokenStore, prepare_store, rows_to_batch
from zoo_train.data.store import layout
from zoo_train.loop import read_metrics
from zoo_train.parallel import make_mesh
from zoo_train.preference import (
    PreferenceConfig,
    PreferenceLoss,
    reference_logps,
    side_sums,
)
from zoo_train.testing import WORDS, tiny_hf_llama

SEQ = 48  # tokens per row: several pairs share one


def _pairs(rng: np.random.Generator, n: int, *, learnable: bool = False) -> list[dict]:
    """Standard-layout pairs of the tiny tokenizer's words (``learnable``: the chosen reply is
    always "alpha ...", which a model picks up in a few steps)."""
    out = []
    for _ in range(n):
        prompt = " ".join(rng.choice(WORDS, int(rng.integers(2, 5))))
        chosen = " " + " ".join(
            ["alpha"] * int(rng.integers(1, 4)) if learnable else rng.choice(WORDS, 3)
        )
        rejected = " " + " ".join(rng.choice(WORDS[5:], int(rng.integers(1, 4))))
        out.append({"prompt": prompt, "chosen": chosen, "rejected": rejected})
    return out


def _write_jsonl(path: pathlib.Path, records: list[dict]) -> pathlib.Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two random tiny Llamas (a policy and a reference) with the tiny tokenizer, six pairs and
    their store."""
    root = tmp_path_factory.mktemp("preference")
    policy = tiny_hf_llama(root / "policy", seed=1)
    reference = tiny_hf_llama(root / "reference", seed=2)
    records = _pairs(np.random.default_rng(3), 6)
    data = _write_jsonl(root / "pairs.jsonl", records)
    store = root / "store"
    prepare_store(data, store, tokenizer=policy, eval_fraction=0.0, progress=False, workers=1)
    return {"root": root, "policy": policy, "reference": reference, "records": records,
            "store": store}  # fmt: skip


def _rows(store: pathlib.Path, seq_len: int = SEQ) -> tuple[dict, object]:
    """Every packed row of the store's training split, and the split."""
    split = TokenStore(store).split("train")
    lay = layout(split, seq_len, whole=True)
    return lay.read(np.arange(lay.rows), 0), split


def _zoo(path: pathlib.Path):
    return zoo_models.load_hf(path, dtype="float32", attention_implementation="xla")


def _metrics(loss_fn: PreferenceLoss, model, batch: dict) -> dict[str, float]:
    """The step's view of one batch: the loss and every metric as means over pairs."""
    batch = {k: jnp.asarray(v) for k, v in batch.items()}
    loss_sum, aux = jax.jit(loss_fn)(model, batch, None)
    weight = float(aux["weight"])
    means = {k: float(v) / weight for k, v in aux.items() if k != "weight"}
    return {"loss": float(loss_sum) / weight, "pairs": weight, **means}


def _with_reference(batch: dict, split, reference_model) -> dict:
    mesh = make_mesh(None)
    (table,) = reference_logps(reference_model, [split], seq_len=SEQ, batch_size=len(
        batch["input_ids"]), mesh=mesh, rules={})  # fmt: skip
    split.reference = table
    lay = layout(split, SEQ, whole=True)
    return lay.read(np.arange(lay.rows), 0)


# --- TRL's DPOTrainer (DPO and IPO) ----------------------------------------------------------


def _trl_metrics(tiny, loss_type: str, beta: float) -> dict[str, float]:
    """TRL's evaluation of the pairs in one batch: the policy against the reference model."""
    import datasets
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny["policy"], dtype=torch.float32)
    ref = AutoModelForCausalLM.from_pretrained(tiny["reference"], dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(tiny["policy"])
    tokenizer.pad_token = tokenizer.eos_token
    args = DPOConfig(
        output_dir=str(tiny["root"] / f"trl-{loss_type}"),
        beta=beta,
        loss_type=[loss_type],
        per_device_eval_batch_size=len(tiny["records"]),
        report_to=[],
        use_cpu=True,
        bf16=False,  # TRL's default on: a bfloat16 autocast of the reference on CPU
        max_length=None,
        dataset_num_proc=None,
    )
    dataset = datasets.Dataset.from_list(tiny["records"])
    trainer = DPOTrainer(
        model=model,
        ref_model=ref,
        args=args,
        train_dataset=dataset,
        eval_dataset=dataset,
        processing_class=tokenizer,
    )
    return trainer.evaluate()


@pytest.mark.parametrize(("objective", "loss_type"), [("dpo", "sigmoid"), ("ipo", "ipo")])
def test_dpo_and_ipo_equal_trl_on_the_same_model_and_pairs(tiny, objective, loss_type):
    beta = 0.3
    expected = _trl_metrics(tiny, loss_type, beta)
    batch, split = _rows(tiny["store"])
    batch = _with_reference(batch, split, _zoo(tiny["reference"]))
    loss_fn = PreferenceLoss(PreferenceConfig(objective, beta), reference="batch")
    got = _metrics(loss_fn, _zoo(tiny["policy"]), batch)
    assert got["pairs"] == len(tiny["records"])
    names = ["loss", "rewards/chosen", "rewards/rejected", "rewards/accuracies",
             "rewards/margins", "logps/chosen", "logps/rejected"]  # fmt: skip
    for name in names:
        want = expected[f"eval_{name}"]
        assert got[name] == pytest.approx(want, rel=1e-5, abs=1e-5), (name, got[name], want)


# --- SimPO and ORPO: the papers' formulas over transformers' float64 log-probabilities ------


def _hf_sides(path: pathlib.Path, batch: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per pair, ``(log-probabilities, weights)`` of its chosen and rejected response tokens
    under the ``transformers`` model at ``path`` in float64, each side run alone."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    sides = []
    for row in range(len(batch["input_ids"])):
        seg = batch["segment_ids"][row]
        for s in range(1, int(seg.max()) + 1):
            at = seg == s
            ids = np.append(batch["input_ids"][row][at], batch["targets"][row][at][-1])
            with torch.no_grad():
                logits = model(torch.as_tensor(ids[None], dtype=torch.long)).logits[0, :-1]
            lp = torch.log_softmax(logits, -1).gather(-1, torch.as_tensor(ids[1:, None]))[:, 0]
            sides.append((lp.numpy(), batch["loss_mask"][row][at].astype(np.float64)))
    return list(zip(sides[0::2], sides[1::2], strict=True))


def _paper(objective: str, pairs: list, beta: float, gamma: float) -> dict[str, float]:
    """SimPO (Meng et al. 2024, Eq. 6) and ORPO (Hong et al. 2024, Eqs. 4-7), float64."""
    rows = []
    for (lp_c, w_c), (lp_r, w_r) in pairs:
        mean_c, mean_r = (lp_c * w_c).sum() / w_c.sum(), (lp_r * w_r).sum() / w_r.sum()
        row = {"logps/chosen": mean_c, "logps/rejected": mean_r,
               "rewards/chosen": beta * mean_c, "rewards/rejected": beta * mean_r}  # fmt: skip
        if objective == "simpo":
            row["loss"] = -math.log(1 / (1 + math.exp(-(beta * (mean_c - mean_r) - gamma))))
        else:
            odds = lambda m: math.exp(m) / (1 - math.exp(m))  # P/(1-P), P=exp(mean)
            log_odds = math.log(odds(mean_c) / odds(mean_r))
            ratio = -math.log(1 + math.exp(-log_odds))  # log sigmoid
            row.update(loss=-mean_c - beta * ratio, log_odds_ratio=ratio, nll_loss=-mean_c,
                       log_odds_chosen=log_odds)  # fmt: skip
        row["rewards/margins"] = row["rewards/chosen"] - row["rewards/rejected"]
        row["rewards/accuracies"] = float(row["rewards/chosen"] > row["rewards/rejected"])
        rows.append(row)
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


@pytest.mark.parametrize("objective", ["simpo", "orpo"])
def test_simpo_and_orpo_equal_the_papers_formulas_in_float64(tiny, objective):
    beta, gamma = (2.0, 0.7) if objective == "simpo" else (0.25, 0.0)
    batch, _ = _rows(tiny["store"])
    expected = _paper(objective, _hf_sides(tiny["policy"], batch), beta, gamma)
    config = PreferenceConfig(objective, beta, simpo_gamma=gamma)
    got = _metrics(PreferenceLoss(config, reference=None), _zoo(tiny["policy"]), batch)
    assert got["pairs"] == len(tiny["records"])
    for name, want in expected.items():
        assert got[name] == pytest.approx(want, rel=1e-5, abs=1e-5), (name, got[name], want)


# --- packing ----------------------------------------------------------------------------------


def _one_pair_per_row(split, width: int) -> dict:
    """Each pair alone in a row of ``width`` tokens, padded: built from the store's documents
    directly, not by the packed reader."""
    rows, segs, pos, weights, refs = [], [], [], [], []
    for doc in range(split.num_documents):
        tokens, weight = split.document(doc)
        chosen = int(split.pair_info[doc, 0])
        n = len(tokens)
        pad = width - n
        rows.append(np.concatenate([tokens, np.zeros(pad, tokens.dtype)]))
        segs.append(np.array([1] * chosen + [2] * (n - chosen) + [0] * pad))
        pos.append(np.concatenate([np.arange(chosen), np.arange(n - chosen), np.zeros(pad)]))
        weights.append(np.concatenate([weight, np.zeros(pad)]))
        ref = np.zeros(width, np.float32)
        ref[0], ref[chosen] = split.reference[doc]
        refs.append(ref)
    batch = rows_to_batch(np.stack(rows), np.stack(segs), np.stack(pos).astype(np.int32),
                          np.stack(weights).astype(np.float32))  # fmt: skip
    return {**batch, "ref_logps": np.stack(refs)[:, :-1]}


def test_packed_and_one_pair_per_row_give_the_same_loss_and_gradients(tiny):
    batch, split = _rows(tiny["store"])
    packed = _with_reference(batch, split, _zoo(tiny["reference"]))
    width = int(max(np.diff(np.append(split.starts, split.num_tokens)))) + 1
    single = _one_pair_per_row(split, width)
    assert len(packed["input_ids"]) < len(single["input_ids"])  # pairs do share rows
    loss_fn = PreferenceLoss(PreferenceConfig("dpo", 0.5), reference="batch")
    model = _zoo(tiny["policy"])

    def mean_loss(m, b):
        loss_sum, aux = loss_fn(m, {k: jnp.asarray(v) for k, v in b.items()}, None)
        return loss_sum / aux["weight"]

    grad = jax.jit(jax.value_and_grad(mean_loss))
    (loss_p, grads_p), (loss_s, grads_s) = grad(model, packed), grad(model, single)
    assert float(loss_p) == pytest.approx(float(loss_s), rel=1e-6)
    for a, b in zip(jax.tree.leaves(grads_p), jax.tree.leaves(grads_s), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    # The sides' log-probabilities, summed per segment, are those of each pair on its own.
    sums = side_sums(jnp.asarray(packed["ref_logps"]), jnp.asarray(packed["segment_ids"]))
    counts = side_sums(jnp.asarray(packed["loss_mask"]), jnp.asarray(packed["segment_ids"]))
    got = [np.asarray(v)[np.asarray(counts[0]) > 0] for v in sums]  # row by row, in order
    np.testing.assert_array_equal(np.stack(got, axis=1), split.reference)


# --- bad input ----------------------------------------------------------------------------------


def test_bad_pairs_are_refused_or_skipped_with_a_count_naming_file_and_line(tmp_path):
    good = {"prompt": "Say hi.", "chosen": " hi", "rejected": " bye"}
    chat = {"prompt": [{"role": "user", "content": "hi"}],
            "chosen": [{"role": "assistant", "content": "hello"}],
            "rejected": [{"role": "assistant", "content": "go"}]}  # fmt: skip
    refused = {
        "`rejected` is missing": {"prompt": "p", "chosen": " a"},
        "must be assistant messages": {**chat, "chosen": [{"role": "user", "content": "x"}]},
    }
    for words, bad in refused.items():
        data = _write_jsonl(tmp_path / "bad.jsonl", [good, bad])
        with pytest.raises(ValueError, match=rf"bad\.jsonl:2: .*{words}"):
            prepare_store(data, tmp_path / "s", eval_fraction=0.0, progress=False, workers=1)
    long = {"prompt": "a long prompt " * 8, "chosen": " x", "rejected": " y"}
    records = [good, chat, {**good, "rejected": " hi"}, {**good, "chosen": " "}, good, long]
    data = _write_jsonl(tmp_path / "pairs.jsonl", records)
    store = tmp_path / "store"
    prepare_store(data, store, eval_fraction=0.0, progress=False, workers=1)
    skipped = json.loads((store / "manifest.json").read_text())["skipped"]["pairs"]
    assert skipped == {"identical": [1, f"{data}:3"], "empty": [1, f"{data}:4"]}
    split = TokenStore(store).split("train")
    assert split.pairs == 4
    lay = layout(split, 96, whole=False)
    assert [split.origin(int(d)) for d in lay.skipped] == ["pairs.jsonl:6"]
    # The conversational pair's sides: the reply alone weighted, the prompt's turn not.
    tokens, weight = split.document(1)
    chosen = int(split.pair_info[1, 0])
    text = bytes(tokens[:chosen][weight[:chosen] > 0][:-1].astype(np.uint8)).decode()
    assert text.startswith("hello") and "hi" not in text


def test_objective_on_plain_text_is_refused_before_the_model_loads(tmp_path, capsys):
    (tmp_path / "plain.txt").write_text("just text\n")
    code = main(["finetune", "--from-hf", str(tmp_path / "no-such-model"), "--data",
                 str(tmp_path / "plain.txt"), "--objective", "dpo", "--out", str(tmp_path / "r")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "--objective dpo trains on preference pairs" in err[0] and "plain.txt" in err[0]
    assert not (tmp_path / "r").exists()


def _finetune_dpo(tiny, data: pathlib.Path, out: pathlib.Path, *extra: str) -> int:
    return main(["finetune", "--from-hf", str(tiny["policy"]), "--data", str(data),
                 "--objective", "dpo", "--lora-rank", "2", "--steps", "1", "--batch-size", "1",
                 "--no-progress", "--out", str(out), *extra])  # fmt: skip


def test_pairs_none_of_which_fits_a_row_are_refused_naming_the_shortest(tiny, tmp_path, capsys):
    rng = np.random.default_rng(11)
    records = [{"prompt": " ".join(rng.choice(WORDS, int(rng.integers(12, 20)))),
                "chosen": " alpha beta", "rejected": " gamma"} for _ in range(8)]  # fmt: skip
    data = _write_jsonl(tmp_path / "long.jsonl", records)
    # The shortest pair, from a store of the same pairs (both sides, as a row holds them).
    store = tmp_path / "store"
    prepare_store(data, store, tokenizer=tiny["policy"], eval_fraction=0.0, progress=False)
    split = TokenStore(store).split("train")
    shortest = int(np.diff(np.append(split.starts, split.num_tokens)).min())
    assert shortest > 17
    capsys.readouterr()
    code = _finetune_dpo(tiny, data, tmp_path / "run", "--seq-len", "16", "--eval-data", str(data))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "None of the 8 preference pairs" in err[0] and "seq_len + 1 = 17 tokens" in err[0]
    assert f"the shortest pair takes {shortest}" in err[0]
    assert f"at least {shortest - 1}" in err[0] and "training tokens" not in err[0]


def test_pairs_all_identical_are_refused_as_skipped(tiny, tmp_path, capsys):
    same = [{"prompt": f"p {i}", "chosen": " alpha", "rejected": " alpha"} for i in range(5)]
    data = _write_jsonl(tmp_path / "same.jsonl", same)
    capsys.readouterr()
    code = _finetune_dpo(tiny, data, tmp_path / "run", "--seq-len", str(SEQ))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert (
        f"skipped 5 pairs whose chosen and rejected responses are identical (first: {data}:1)"
        in err[0]
    )
    assert "no readable documents" not in err[0] and "hold no text" not in err[0]


# --- the command line, end to end ---------------------------------------------------------------


@pytest.fixture(scope="module")
def lora_run(tiny, tmp_path_factory):
    """``zoo finetune --objective dpo`` with LoRA on learnable pairs (one identical, one too
    long), evaluated on held-out pairs, exported."""
    root = tmp_path_factory.mktemp("lora-dpo")
    rng = np.random.default_rng(5)
    train = _pairs(rng, 40, learnable=True)
    train += [{**train[0], "rejected": train[0]["chosen"]},
              {"prompt": "alpha " * 30, "chosen": " alpha", "rejected": " beta"}]  # fmt: skip
    _write_jsonl(root / "train.jsonl", train)
    _write_jsonl(root / "val.jsonl", _pairs(rng, 12, learnable=True))
    args = ["finetune", "--from-hf", str(tiny["policy"]), "--data", str(root / "train.jsonl"),
            "--eval-data", str(root / "val.jsonl"), "--objective", "dpo", "--lora-rank", "4",
            "--out", str(root / "run"), "--steps", "12", "--batch-size", "4", "--seq-len",
            str(SEQ), "--lr", "2e-2", "--eval-every", "12", "--log-every", "1", "--no-progress",
            "--export-hf", str(root / "export")]  # fmt: skip
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        code = main(args)
    return root, code, said.getvalue()


def test_lora_dpo_starts_at_ln2_learns_and_exports_for_peft(tiny, lora_run, capsys):
    root, code, _ = lora_run
    assert code == 0
    records = read_metrics(root / "run" / "metrics.jsonl")
    first = next(r for r in records if r.get("step") == 1 and "loss" in r)
    # Zero-initialised adapters: the policy computes what its reference does, up to the order
    # XLA sums the two forward passes in (which depends on the CPU it compiles for).
    assert first["loss"] == pytest.approx(math.log(2), rel=1e-6)
    for name in ("rewards/chosen", "rewards/rejected", "rewards/margins"):
        assert first[name] == pytest.approx(0.0, abs=1e-6), name
    assert first["pairs"] > 0 and "tokens" not in first
    evals = [r for r in records if "eval_rewards/accuracies" in r]
    assert evals[0]["step"] == 0 and evals[0]["eval_loss"] == pytest.approx(math.log(2), rel=1e-6)
    assert evals[-1]["step"] == 12 and evals[-1]["eval_rewards/accuracies"] > 0.8
    assert evals[-1]["eval_rewards/margins"] > 0 and evals[-1]["eval_pairs"] == 12
    # The adapter loads in peft, and merged it is the export.
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny["policy"], dtype=torch.float32).eval()
    export = AutoModelForCausalLM.from_pretrained(root / "export", dtype=torch.float32).eval()
    ids = torch.as_tensor(np.random.default_rng(0).integers(3, 256, (2, 12)))
    with torch.no_grad():
        before, want = base(ids).logits.numpy(), export(ids).logits.numpy()
        peft = PeftModel.from_pretrained(base, root / "run" / "adapter").eval()
        got = peft(ids).logits.numpy()
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert not np.allclose(got, before, atol=1e-3)  # the adapters learned something


def test_lora_dpo_says_what_it_skipped_and_what_packing_saved(lora_run):
    root, _, said = lora_run
    train = root / "train.jsonl"
    assert (
        f"zoo: skipped 1 pair whose chosen and rejected responses are identical (first: {train}:41)"
        in said
    )
    assert (
        f"zoo: skipped 1 pair longer than a row of --seq-len + 1 = {SEQ + 1} tokens (first: "
        "train.jsonl:42); raise --seq-len to train on them." in said
    )
    packed = re.search(r"zoo: 40 pairs packed into (\d+) rows of 49 tokens: ([\d.]+)% padding "
                       r"\(one pair per row: ([\d.]+)%", said)  # fmt: skip
    assert packed and int(packed[1]) < 40 and float(packed[2]) < float(packed[3])
    assert "reference: the base model with the LoRA adapters switched off" in said
    assert re.search(r"step 12: eval loss [\d.]+, reward accuracy", said)
    # The objective is part of the run's identity: resuming with another is refused.
    start = next(r for r in read_metrics(root / "run" / "metrics.jsonl") if r.get("event"))
    assert start["run_info"]["objective"] == {"name": "dpo", "beta": None, "simpo_gamma": None}


def test_full_dpo_computes_the_reference_once_and_resume_reads_it(tiny, tmp_path):
    data = _write_jsonl(tmp_path / "train.jsonl", _pairs(np.random.default_rng(7), 24))
    args = ["finetune", "--from-hf", str(tiny["policy"]), "--data", str(data), "--objective",
            "dpo", "--beta", "0.2", "--out", str(tmp_path / "run"), "--steps", "4", "--batch-size",
            "4", "--seq-len", str(SEQ), "--lr", "1e-3", "--log-every", "1", "--no-progress"]  # fmt: skip
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        assert main([*args, "--stop-at", "2"]) == 0
    assert "reference log-probabilities of 24 pairs computed" in said.getvalue()
    (kept,) = (tmp_path / "run" / "reference").glob("*-train.npy")
    table, stamp = np.load(kept), kept.stat().st_mtime_ns
    # The table is the starting model's log-probabilities of each side, from the store's rows.
    store = next((tmp_path / ".zoo-data-cache").iterdir())
    split = TokenStore(store).split("train")
    lay = layout(split, SEQ, whole=True)
    batch = lay.read(np.arange(lay.rows), 0)
    sides = _hf_sides(tiny["policy"], batch)
    want = [[(lp * w).sum() for lp, w in pair] for pair in sides]
    np.testing.assert_allclose(table, np.array(want), rtol=1e-5)
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        assert main(args) == 0
    assert "reference log-probabilities read from" in said.getvalue()
    assert kept.stat().st_mtime_ns == stamp
    steps = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    assert steps[0]["loss"] == pytest.approx(math.log(2), abs=1e-5)  # the policy is the reference
    assert all(math.isfinite(r["rewards/margins"]) for r in steps)
