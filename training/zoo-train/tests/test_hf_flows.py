"""A bfloat16 Hugging Face checkpoint with its own tokenizer, end to end: LoRA fine-tuning, then
every command on the run, the export in transformers (tokenizer, model, generation config,
greedy tokens), extending the finished run, and the refusals around it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil

import equinox as eqx
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

import zoo_models
import zoo_train
from zoo_train._inference import sample_ids
from zoo_train._run_directory import load_run
from zoo_train.cli import main
from zoo_train.data import (
    Document,
    HeldOut,
    TokenStore,
    prepare_store,
    tokenize_documents,
)
from zoo_train.testing import tiny_hf_llama, tiny_tokenizer, write_corpus

PROMPT = "def alpha return"
RUN_ARGS = [
    "--batch-size", "2", "--seq-len", "16", "--eval-every", "0", "--no-progress",
    "--lora-rank", "2", "--lora-targets", "q", "v", "--lr", "1e-2", "--set", "eval_batches=1",
]  # fmt: skip


def _finetune(root, *extra: str) -> int:
    return main([
        "finetune", "--from-hf", str(root / "hf16"), "--data", str(root / "corpus"),
        "--out", str(root / "run"), *RUN_ARGS, *extra,
    ])  # fmt: skip


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    root = tmp_path_factory.mktemp("flows")
    tiny_hf_llama(root / "hf16", dtype="bfloat16")
    write_corpus(root / "corpus", files=40, lines=2)  # enough files to hold out by hash
    # Chat data beside the text: rendered with the tokenizer's template, loss on the replies.
    chat = [
        {
            "messages": [
                {"role": "user", "content": f"alpha {i}?"},
                {"role": "assistant", "content": "beta " * i},
            ]
        }
        for i in range(1, 9)
    ]
    (root / "corpus" / "chat.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chat))
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        assert _finetune(root, "--steps", "4", "--export-hf", str(root / "export")) == 0
    (root / "stderr.txt").write_text(said.getvalue())
    return root


def _records(run) -> list[dict]:
    return zoo_train.read_metrics(run / "metrics.jsonl")


def test_bf16_run_is_usable_by_every_command(flow):
    run = flow / "run"
    # Float32 master weights, said on start and recorded; the step-0 evaluation is recorded too.
    err = (flow / "stderr.txt").read_text()
    start = _records(run)[0]
    assert start["event"] == "start" and start["compute_dtype"] == "float32"
    params = start["parameters"]
    assert params["param_dtype"] == "float32" and params["stored_dtype"] == "bfloat16"
    assert 0 < params["trainable"] < params["total"]
    assert f"{params['trainable']:,} trainable of {params['total']:,}" in err
    evals = [r["step"] for r in _records(run) if "eval_loss" in r]
    assert evals == [0, 4]
    # Every command loads the run (each failed on the optimizer state's dtype before).
    eval_args = ["--data", str(flow / "corpus"), "--seq-len", "16", "--batch-size", "2"]
    assert main(["eval", str(run), *eval_args, "--max-batches", "1"]) == 0
    assert main(["generate", str(run), "--greedy", "--max-new-tokens", "3"]) == 0
    assert main(["convert", str(run), str(flow / "converted")]) == 0
    config = json.loads((flow / "converted" / "config.json").read_text())
    assert config["dtype"] == "bfloat16"  # exported in the dtype the checkpoint came in
    tensors = load_file(str(flow / "converted" / "model.safetensors"))
    assert {str(t.dtype) for t in tensors.values()} == {"bfloat16"}
    # Every file written follows the umask: readable by others on a shared disk, weights too.
    umask = os.umask(0o022)
    os.umask(umask)
    written = [flow / "export", flow / "converted", run / "adapter"]
    modes = {f.name: f.stat().st_mode & 0o777 for d in written for f in d.iterdir() if f.is_file()}
    assert {"model.safetensors", "adapter_model.safetensors", "config.json"} <= set(modes)
    assert set(modes.values()) == {0o666 & ~umask}, modes


def test_export_loads_in_transformers_and_greedy_matches(flow, capsys):
    export = flow / "export"
    tok = AutoTokenizer.from_pretrained(export)
    generation = json.loads((export / "generation_config.json").read_text())
    source = json.loads((flow / "hf16" / "generation_config.json").read_text())
    source.pop("_from_model_config", None)
    assert generation == source and generation["eos_token_id"] == 2  # the source's settings
    hf = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32).eval()
    ids = tok(PROMPT, return_tensors="pt")
    assert ids["input_ids"][0, 0].item() == tok.bos_token_id == 1
    with torch.no_grad():
        out = hf.generate(**ids, do_sample=False, max_new_tokens=10)[0, ids["input_ids"].shape[1] :]
    want = out.tolist()
    want = want[: want.index(2)] if 2 in want else want
    model = zoo_models.load_hf(export)
    ours = sample_ids(
        model, zoo_models.load_tokenizer(export), PROMPT, max_new_tokens=10, greedy=True
    )
    assert ours == want
    # The command prints the same continuation.
    capsys.readouterr()
    args = ["generate", str(export), "--prompt", PROMPT, "--greedy", "--max-new-tokens", "10"]
    assert main(args) == 0
    assert capsys.readouterr().out == PROMPT + tok.decode(want, skip_special_tokens=True) + "\n"


def _greedy_ids(model, ids, eos) -> list[int]:
    with torch.no_grad():
        out = model.generate(**ids, do_sample=False, max_new_tokens=10)
    new = out[0, ids["input_ids"].shape[1] :].tolist()
    ends = [i for i, t in enumerate(new) if t in eos]
    return new[: ends[0]] if ends else new


def test_stop_tokens_of_the_checkpoint_are_kept_and_followed(flow, tmp_path, capsys):
    # An instruction-tuned checkpoint also stops at its end-of-turn token (eos_token_id a list
    # in generation_config.json): zoo generate must stop where transformers stops, and runs and
    # exports must keep the list.
    source = tmp_path / "instruct"
    shutil.copytree(flow / "export", source)
    tok = AutoTokenizer.from_pretrained(source)
    ids = tok(PROMPT, return_tensors="pt")
    hf = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
    free = _greedy_ids(hf, ids, [2])
    assert len(free) > 2
    stops = [2, free[1]]  # the second new token plays the end-of-turn token
    settings = {"bos_token_id": 1, "eos_token_id": stops}
    (source / "generation_config.json").write_text(json.dumps(settings))
    hf = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
    want = _greedy_ids(hf, ids, stops)
    assert len(want) == 1
    expected = PROMPT + tok.decode(want, skip_special_tokens=True) + "\n"
    args = ["--prompt", PROMPT, "--greedy", "--max-new-tokens", "10"]
    capsys.readouterr()
    assert main(["generate", str(source), *args]) == 0
    assert capsys.readouterr().out == expected
    # Through a run and back: the run stops there too, and so does the export in transformers.
    assert main(["convert", str(source), str(tmp_path / "run")]) == 0
    assert main(["convert", str(tmp_path / "run"), str(tmp_path / "back")]) == 0
    capsys.readouterr()
    assert main(["generate", str(tmp_path / "run"), *args]) == 0
    assert capsys.readouterr().out == expected
    back = AutoModelForCausalLM.from_pretrained(tmp_path / "back", dtype=torch.float32)
    assert back.generation_config.eos_token_id == stops


def test_bos_follows_the_tokenizer_configuration(tmp_path):
    docs = [Document("a", "alpha beta")]
    with_bos = zoo_models.load_tokenizer(tiny_tokenizer(tmp_path / "bos"))
    without = zoo_models.load_tokenizer(tiny_tokenizer(tmp_path / "plain", add_bos=False))
    for tok, name in ((with_bos, "bos"), (without, "plain")):
        reference = AutoTokenizer.from_pretrained(tmp_path / name)("alpha beta")["input_ids"]
        (ids,) = tokenize_documents(docs, tok)
        assert ids.tolist() == [*reference, 2]  # training rows: as transformers encodes, then EOS
    assert with_bos.add_bos and not without.add_bos


@eqx.filter_jit
def _forward(model, ids):
    return model(ids)


def _base(flow):
    return AutoModelForCausalLM.from_pretrained(flow / "hf16", dtype=torch.float32).eval()


def test_lora_adapter_is_a_peft_adapter(flow):
    from peft import PeftModel

    ids = np.random.default_rng(0).integers(0, 256, (2, 12))
    ours = np.asarray(_forward(load_run(flow / "run").model, ids))
    adapted = PeftModel.from_pretrained(_base(flow), flow / "run" / "adapter").eval()
    with torch.no_grad():
        theirs = adapted(torch.as_tensor(ids)).logits.numpy()
        merged = adapted.merge_and_unload()(torch.as_tensor(ids)).logits.numpy()
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=2e-5)
    np.testing.assert_allclose(merged, ours, rtol=0, atol=2e-5)


def test_lora_from_continues_a_peft_adapter(flow):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    config = LoraConfig(
        r=2, lora_alpha=4, target_modules=["q_proj", "up_proj"], init_lora_weights=False
    )
    adapted = get_peft_model(_base(flow), config).eval()
    adapted.save_pretrained(flow / "peft_in")
    out = flow / "from_peft"
    args = ["finetune", "--from-hf", str(flow / "hf16"), "--data", str(flow / "corpus")]
    args += ["--out", str(out), *RUN_ARGS[:7], "--lora-from", str(flow / "peft_in")]
    held_out = flow / "corpus" / "chat.jsonl"
    assert main([*args, "--steps", "1", "--lr", "1e-9", "--eval-data", str(held_out)]) == 0
    # --eval-data is what was evaluated (its reply tokens), not a split of --data.
    tok = load_run(out).tokenizer
    store = flow / "held-store"
    prepare_store(held_out, store, tokenizer=tok, workers=1, eval_fraction=0.0, progress=False)
    loader = HeldOut(TokenStore(store), 16, splits=("train", "eval"))
    counted = sum(b["loss_mask"].sum() for b in loader.eval_batches(2, max_batches=8))
    evals = [r for r in _records(out) if "eval_loss" in r]
    assert [r["step"] for r in evals] == [0, 1] and evals[0]["eval_tokens"] == counted
    # With a negligible lr the adapter comes back as it was, under the same names, computing
    # what PEFT computes.
    before = load_file(str(flow / "peft_in" / "adapter_model.safetensors"))
    after = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    assert sorted(after) == sorted(before)
    for name in before:
        np.testing.assert_allclose(after[name], before[name], rtol=0, atol=1e-6, err_msg=name)
    ids = np.random.default_rng(1).integers(0, 256, (1, 12))
    with torch.no_grad():
        theirs = adapted(torch.as_tensor(ids)).logits.numpy()
    np.testing.assert_allclose(
        np.asarray(_forward(load_run(out).model, ids)), theirs, rtol=0, atol=2e-5
    )


def test_a_finished_run_is_extended_by_raising_steps(flow, capsys):
    run = flow / "run"
    assert _finetune(flow, "--steps", "6") == 0
    resumed = [r for r in _records(run) if r.get("event") == "resume"][-1]
    assert resumed["resumed_from"] == 4
    assert resumed["steps_changed"] == {"from": 4, "to": 6}
    err = capsys.readouterr().err
    assert "now ends at step 6 (was 4)" in err
    # The run's export is brought up to date where it was (it held step 4).
    assert "held step 4; exporting step 6 there" in err
    assert main(["convert", str(run), str(flow / "at6")]) == 0
    exported = load_file(str(flow / "export" / "model.safetensors"))
    converted = load_file(str(flow / "at6" / "model.safetensors"))
    assert sorted(exported) == sorted(converted)
    for name, tensor in converted.items():
        np.testing.assert_array_equal(exported[name], tensor, err_msg=name)
    loaded = load_run(run)
    assert loaded.step == 6
    assert loaded.meta["extensions"] == [{"at_step": 4, "from": 4, "to": 6}]
    lrs = [r["lr"] for r in _records(run) if "lr" in r]
    assert lrs[-1] < max(lrs)  # the schedule decays to the new end
    # Asked again for its 6 steps (and its export, which holds them): said, nothing touched.
    capsys.readouterr()
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    export = {p: p.read_bytes() for p in sorted((flow / "export").rglob("*")) if p.is_file()}
    assert _finetune(flow, "--steps", "6") == 0
    assert _finetune(flow, "--steps", "6", "--export-hf", str(flow / "export")) == 0
    err = capsys.readouterr().err
    assert err.count("already complete at step 6") == 2 and "resuming" not in err
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()} == before
    assert {
        p: p.read_bytes() for p in sorted((flow / "export").rglob("*")) if p.is_file()
    } == export
    # What really changes the run stays refused; so does ending before the checkpoint.
    assert _finetune(flow, "--steps", "8", "--seed", "1") == 2
    assert "different run" in capsys.readouterr().err
    assert _finetune(flow, "--steps", "5") == 2


def test_hf_directory_without_tokenizer_needs_one(flow, capsys):
    bare = flow / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(flow / "hf16" / name, bare / name)
    finetune = ["finetune", "--from-hf", str(bare), "--out", str(flow / "bare-run")]
    for command in (["generate", str(bare)], finetune):
        assert main(command) == 2
        assert "has no tokenizer" in capsys.readouterr().err
    assert not (flow / "bare-run").exists()  # refused: nothing created
    args = ["--tokenizer", str(flow / "hf16"), "--greedy", "--max-new-tokens", "2"]
    assert main(["generate", str(bare), *args]) == 0


def test_broken_weights_and_positions_are_sentences(flow, capsys):
    for name, data in (
        ("empty", b""),
        ("cut", (flow / "hf16" / "model.safetensors").read_bytes()[:900]),
    ):
        broken = flow / name
        shutil.copytree(flow / "hf16", broken)
        (broken / "model.safetensors").write_bytes(data)
        assert main(["generate", str(broken)]) == 2
        err = capsys.readouterr().err
        assert "is not a readable safetensors file" in err and "Traceback" not in err
