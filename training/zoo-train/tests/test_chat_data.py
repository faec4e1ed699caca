"""Instruction and chat data: rendering with the tokenizer's chat template (as transformers
renders it), and loss weights that are exactly zero off the assistant/completion tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zoo_models
from zoo_train.cli import main
from zoo_train.data import Document, PackedLoader, load_documents, tokenize_examples
from zoo_train.testing import tiny_hf_llama, tiny_tokenizer

MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "what is alpha?"},
    {"role": "assistant", "content": "beta gamma"},
    {"role": "user", "content": "and?"},
    {"role": "assistant", "content": "return self"},
]


def _turns(messages) -> tuple[tuple[str, str], ...]:
    return tuple((m["role"], m["content"]) for m in messages)


def test_plain_fallback_weights_match_a_hand_built_example():
    tok = zoo_models.ByteTokenizer(bos=True, eos=True)  # no chat template: the plain format
    docs = [
        Document("c", "", (("user", "hi"), ("assistant", "yo"))),
        Document("p", "", (("prompt", "Q: 1+2?"), ("completion", " 3"))),
        Document("t", "ab"),  # plain text beside them: every token counts
    ]
    ids, weights = tokenize_examples(docs, tok)
    prompt, reply = "user: hi\nassistant: ", "yo\n"
    want_ids = [256, *(prompt + reply).encode(), 257]
    want_w = [0] * (1 + len(prompt)) + [1] * (len(reply) + 1)  # BOS, prompt | reply, EOS
    assert ids[0].tolist() == want_ids and weights[0].tolist() == want_w
    assert ids[1].tolist() == [256, *b"Q: 1+2? 3", 257]
    assert weights[1].tolist() == [0] * 8 + [1, 1, 1]
    assert weights[2].tolist() == [1] * 4
    # Packed (conversations kept apart by segment ids), the loss mask is each target's weight
    # (and 0 across a document boundary); the last row is padding with no weight at all.
    loader = PackedLoader(ids * 2, seq_len=45, shuffle=False, pad_id=257, weights=weights * 2)
    stream = np.concatenate(ids * 2)
    weight = np.concatenate(weights * 2)
    owner = np.concatenate([[i] * len(d) for i, d in enumerate(ids * 2)])
    want = weight[1:] * (owner[1:] == owner[:-1])  # no target across a document boundary
    rows = list(loader.eval_batches(1))
    assert len(rows) == 2
    got_mask = np.concatenate([r["loss_mask"][0] for r in rows])
    got_targets = np.concatenate([r["targets"][0] for r in rows])
    # Row 1 holds tokens 0..45, row 2 tokens 46.. then padding (weight 0).
    np.testing.assert_array_equal(got_targets[:45], stream[1:46])
    np.testing.assert_array_equal(got_mask[:45], want[:45])
    np.testing.assert_array_equal(got_mask[45 : 45 + len(stream) - 47], want[46:])
    assert got_mask[45 + len(stream) - 47 :].sum() == 0
    assert len(set(rows[0]["segment_ids"][0].tolist())) == 4


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

    from zoo_train._runs import export_tokenizer

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


def test_a_template_that_writes_eos_gets_no_second_one(tmp_path):
    from transformers import AutoTokenizer

    tiny_tokenizer(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = (  # Mistral's shape: each reply ends with eos_token
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] "
        "{{ m['content'] }} [/INST]{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}"
        "{% endfor %}"
    )
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tok = zoo_models.load_tokenizer(tmp_path)
    messages = [m for m in MESSAGES if m["role"] != "system"]
    (ids,), (weights,) = tokenize_examples([Document("c", "", _turns(messages))], tok)
    want = AutoTokenizer.from_pretrained(tmp_path).apply_chat_template(
        messages, tokenize=True, return_dict=False
    )
    assert ids.tolist() == want and want[-1] == tok.eos_id and want.count(tok.eos_id) == 2
    said = tok.decode(ids[weights == 1].tolist(), skip_special=False)
    assert said.replace(" ", "") == "betagamma</s>returnself</s>"


def test_jsonl_lines_of_messages_and_prompt_completion(tmp_path):
    lines = [
        {"messages": MESSAGES},
        {"prompt": "Q?", "completion": " A."},
        {"text": "plain"},
    ]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    docs = load_documents(tmp_path / "d.jsonl")
    assert [d.turns[0][0] if d.turns else None for d in docs] == ["system", "prompt", None]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(ValueError, match="no assistant message"):
        load_documents(bad)


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


# TRL's convention: the assistant's text inside generation blocks (the loss mask), with the
# fields tool-calling chats carry: reasoning, tool calls, tool results, the example's tools.
GENERATION_TEMPLATE = (
    "{{ bos_token }}{% if tools %}tools: {{ tools | tojson }}\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}"
    "{% generation %}{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>"
    "{% endif %}{{ m.content | default('') }}{% for c in m.tool_calls or [] %}call "
    "{{ c.function.name }} {{ c.function.arguments | tojson }}{% endfor %}<|im_end|>"
    "{% endgeneration %}{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}"
)
TOOL_EXAMPLE = {
    "messages": [
        {"role": "user", "content": "alpha beta?"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "gamma",
            "tool_calls": [{"function": {"name": "def", "arguments": {"x": "return"}}}],
        },
        {"role": "tool", "content": "self value"},
        {"role": "assistant", "content": "beta gamma"},
    ],
    "tools": [{"type": "function", "function": {"name": "def", "parameters": {}}}],
}


def test_generation_blocks_are_the_loss_mask_with_every_message_field(tmp_path):
    from transformers import AutoTokenizer

    tiny_tokenizer(tmp_path / "tok")
    (tmp_path / "tok" / "chat_template.jinja").write_text(GENERATION_TEMPLATE)
    (tmp_path / "d.jsonl").write_text(json.dumps(TOOL_EXAMPLE) + "\n")
    (doc,) = load_documents(tmp_path / "d.jsonl")
    tok = zoo_models.load_tokenizer(tmp_path / "tok")
    (ids,), (weights,) = tokenize_examples([doc], tok)
    reference = AutoTokenizer.from_pretrained(tmp_path / "tok")
    want = reference.apply_chat_template(
        TOOL_EXAMPLE["messages"],
        tools=TOOL_EXAMPLE["tools"],
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    assert ids.tolist() == [*want["input_ids"], tok.eos_id]
    assert weights.tolist() == [*want["assistant_masks"], 1]  # and the EOS after the example
    said = tok.decode(ids[weights == 1].tolist(), skip_special=False).replace(" ", "")
    assert "gamma" in said and "calldef" in said and said.endswith("betagamma<|im_end|></s>")
    assert "alpha" not in said and "value" not in said  # the user's and the tool's turns


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
