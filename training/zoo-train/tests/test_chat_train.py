"""Chat data in training: a template rendered as transformers renders it from where an exported
tokenizer puts it, the evaluation loss on the assistant tokens alone, and a broken template as
one sentence (rendering and masks themselves are zoo-data's, tested there)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zoo_models
from zoo_data import Document, tokenize_examples
from zoo_data.testing import CHAT_MESSAGES as MESSAGES
from zoo_train.cli import main
from zoo_train.testing import tiny_hf_llama, tiny_tokenizer


def _turns(messages) -> tuple[tuple[str, str], ...]:
    return tuple((m["role"], m["content"]) for m in messages)


def _move_template(directory, where: str) -> None:
    """Put the chat template of ``tiny_tokenizer`` where ``where`` says: ``config`` (as
    written), ``jinja`` (``chat_template.jinja``, as ``save_pretrained`` writes it now) or
    ``list`` (the older list of named templates)."""
    if where == "config":
        return
    file = directory / "tokenizer_config.json"
    config = json.loads(file.read_text())
    template = config.pop("chat_template")
    if where == "jinja":
        (directory / "chat_template.jinja").write_text(template)
    else:
        config["chat_template"] = [
            {"name": "tool_use", "template": "{{ raise_exception('not this one') }}"},
            {"name": "default", "template": template},
        ]
    file.write_text(json.dumps(config))


@pytest.mark.parametrize("where", ["config", "jinja", "list"])
def test_chat_template_renders_as_transformers_and_weights_the_assistant(tmp_path, where):
    from transformers import AutoTokenizer

    from zoo_train._run_directory import export_tokenizer

    tiny_tokenizer(tmp_path / "src")
    _move_template(tmp_path / "src", where)
    # The file alone reads as its directory (a run copies what lies beside it).
    tok = zoo_models.load_tokenizer(tmp_path / "src" / "tokenizer.json")
    reference = AutoTokenizer.from_pretrained(tmp_path / "src")
    # An export carries the template wherever it was: transformers finds it there.
    export_tokenizer(tok, tmp_path / "src", tmp_path / "export")
    exported = AutoTokenizer.from_pretrained(tmp_path / "export")
    assert exported.chat_template == reference.chat_template and tok.chat_template
    assert (tok.bos_id, tok.eos_id, tok.add_bos) == (1, 2, True)
    (ids,), (weights,) = tokenize_examples([Document("c", "", _turns(MESSAGES))], tok)
    rendered = reference.apply_chat_template(MESSAGES, tokenize=False)
    want = reference(rendered, add_special_tokens=False)["input_ids"]
    assert ids.tolist() == [*want, tok.eos_id]  # the template decides BOS, as transformers
    said = tok.decode(ids[weights == 1].tolist(), skip_special=False)
    assert said.replace(" ", "") == "betagamma<|im_end|>\nreturnself<|im_end|>\n</s>"
    assert weights.sum() < len(weights) / 2


def _reference_loss(directory, examples) -> tuple[float, int]:
    """transformers' mean cross entropy over the assistant / completion tokens and the EOS
    after each example (found by character offsets), each example on its own."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    total, count = 0.0, 0
    for example in examples:
        if "messages" in example:
            messages = example["messages"]
            text = tok.apply_chat_template(messages, tokenize=False)
            spans = [
                (
                    len(
                        tok.apply_chat_template(
                            messages[:i], tokenize=False, add_generation_prompt=True
                        )
                    ),
                    len(tok.apply_chat_template(messages[: i + 1], tokenize=False)),
                )
                for i, m in enumerate(messages)
                if m["role"] == "assistant"
            ]
            encoded = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        else:  # prompt + completion, special tokens as the tokenizer adds them
            text = example["prompt"] + example["completion"]
            spans = [(len(example["prompt"]), len(text))]
            encoded = tok(text, return_offsets_mapping=True)
        ids = [*encoded["input_ids"], tok.eos_token_id]
        counted = [
            end > start and any(a <= start < b for a, b in spans)
            for start, end in encoded["offset_mapping"]
        ] + [True]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, :-1]
        losses = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="none")
        weight = torch.tensor(counted[1:], dtype=torch.float64)
        total += float((losses.double() * weight).sum())
        count += int(weight.sum())
    return total / count, count


def test_eval_loss_on_chat_data_is_the_assistant_tokens_cross_entropy(tmp_path, capsys):
    # End to end: rendered with the chat template, the loss on replies only, examples packed
    # apart (segments, positions from 0), and data shorter than one row still evaluated.
    tiny_hf_llama(tmp_path / "hf")
    rng = np.random.default_rng()
    words = ["alpha", "beta", "gamma", "def", "return"]

    def say(n: int) -> str:
        return " ".join(rng.choice(words, n))

    examples = [
        {
            "messages": [
                {"role": "user", "content": say(2)},
                {"role": "assistant", "content": say(3)},
            ]
        },
        {"messages": [{"role": "system", "content": say(1)}, *MESSAGES[1:3]]},
        {"prompt": say(2), "completion": " " + say(2)},
    ]
    data = tmp_path / "chat.jsonl"
    data.write_text("".join(json.dumps(e) + "\n" for e in examples))
    want, count = _reference_loss(tmp_path / "hf", examples)
    args = ["eval", str(tmp_path / "hf"), "--data", str(data), "--seq-len", "120", "--json"]
    assert main([*args, "--batch-size", "1"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["tokens"] == count
    np.testing.assert_allclose(got["loss"], want, rtol=1e-5)


def test_finetune_with_a_broken_template_is_one_sentence_naming_the_file(tmp_path, capsys):
    tiny_hf_llama(tmp_path / "hf")
    template = tmp_path / "hf" / "chat_template.jinja"
    template.write_text("{% for m in messages %}{% generation %}{{ m.content }}{% endfor %}")
    (tmp_path / "d.jsonl").write_text(json.dumps({"messages": MESSAGES}) + "\n")
    capsys.readouterr()
    out = tmp_path / "new" / "run"
    args = ["finetune", "--from-hf", str(tmp_path / "hf"), "--data", str(tmp_path / "d.jsonl")]
    assert main([*args, "--out", str(out), "--steps", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert str(out / "tokenizer" / "chat_template.jinja") in err or str(template) in err
    assert not out.exists() and not out.parent.exists()  # a refused command leaves nothing


def test_chat_data_without_a_template_is_said_and_the_export_carries_the_format(tmp_path, capsys):
    # A checkpoint whose tokenizer has no chat template: one line at start says which format
    # the conversations take and how to give a template, and the export carries that format
    # as its chat template, so transformers' apply_chat_template renders what was trained on.
    from transformers import AutoTokenizer

    from zoo_data import render_chat

    hf = tiny_hf_llama(tmp_path / "hf")
    config = json.loads((hf / "tokenizer_config.json").read_text())
    config.pop("chat_template")
    (hf / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="chat_template is not set"):  # the checkpoint's own
        AutoTokenizer.from_pretrained(hf).apply_chat_template(MESSAGES, tokenize=False)
    (tmp_path / "d.jsonl").write_text(json.dumps({"messages": MESSAGES}) + "\n")
    capsys.readouterr()
    export = tmp_path / "export"
    args = ["finetune", "--from-hf", str(hf), "--data", str(tmp_path / "d.jsonl"), "--steps", "1"]
    args += ["--lora-rank", "0", "--batch-size", "1", "--seq-len", "64", "--no-progress"]
    args += ["--sample-tokens", "0", "--eval-every", "0"]
    assert main([*args, "--out", str(tmp_path / "run"), "--export-hf", str(export)]) == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "no chat template" in line]
    assert len(said) == 1 and "`role: content` lines" in said[0]
    assert "chat_template.jinja" in said[0] and "--tokenizer" in said[0]
    exported = AutoTokenizer.from_pretrained(export)
    tok = zoo_models.load_tokenizer(hf)
    for prompt, turns in ((False, MESSAGES), (True, MESSAGES[:2])):
        want = render_chat(_turns(turns), tok, add_generation_prompt=prompt)
        assert (
            exported.apply_chat_template(turns, tokenize=False, add_generation_prompt=prompt)
            == want
        )
    assert want.startswith("system: ") and want.endswith("\nassistant: ")
