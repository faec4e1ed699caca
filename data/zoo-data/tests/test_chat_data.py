"""Instruction and chat data: rendering with the tokenizer's chat template (as transformers
renders it), and loss weights that are exactly zero off the assistant/completion tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zoo_data
from zoo_data import Document, PackedLoader, load_documents, tokenize_examples
from zoo_data.testing import CHAT_MESSAGES, tiny_tokenizer


def _turns(messages) -> tuple[tuple[str, str], ...]:
    return tuple((m["role"], m["content"]) for m in messages)


def test_plain_fallback_weights_match_a_hand_built_example():
    tok = zoo_data.ByteTokenizer(bos=True, eos=True)  # no chat template: the plain format
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
    tok = zoo_data.load_tokenizer(tmp_path)
    messages = [m for m in CHAT_MESSAGES if m["role"] != "system"]
    (ids,), (weights,) = tokenize_examples([Document("c", "", _turns(messages))], tok)
    want = AutoTokenizer.from_pretrained(tmp_path).apply_chat_template(
        messages, tokenize=True, return_dict=False
    )
    assert ids.tolist() == want and want[-1] == tok.eos_id and want.count(tok.eos_id) == 2
    said = tok.decode(ids[weights == 1].tolist(), skip_special=False)
    assert said.replace(" ", "") == "betagamma</s>returnself</s>"


def test_jsonl_lines_of_messages_and_prompt_completion(tmp_path):
    lines = [
        {"messages": CHAT_MESSAGES},
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
    tok = zoo_data.load_tokenizer(tmp_path / "tok")
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
