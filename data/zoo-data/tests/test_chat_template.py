"""Chat templates render as ``transformers``' ``apply_chat_template`` renders them: the same
text, token for token, and the same assistant mask from ``{% generation %}`` blocks, for
templates that use each feature of the environment ``transformers`` gives them."""

from __future__ import annotations

import json
import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

import zoo_data

SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>", "<image>"]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TEMPLATES = {
    # TRL's assistant-mask convention: the reply and its end-of-turn inside generation blocks.
    "generation": (
        "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n"
        "{% if m.role == 'assistant' %}{% generation %}{{ m.content }}<|im_end|>"
        "{% endgeneration %}{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    # Loop controls and the previous item.
    "loop_controls": (
        "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
        "{% if loop.previtem is defined %}[after {{ loop.previtem.role }}] {% endif %}"
        "{{ m.role }}: {{ m.content }}\n{% if loop.index >= 4 %}{% break %}{% endif %}"
        "{% endfor %}"
    ),
    # Llama 3.x: today's date from strftime_now, guarded as its template guards it.
    "strftime_now": (
        "{% if strftime_now is defined %}{% set date = strftime_now('%d %b %Y') %}"
        "{% else %}{% set date = '26 Jul 2024' %}{% endif %}Today: {{ date }}\n" + CHATML
    ),
    # tojson as transformers defines it (no HTML escaping, non-ASCII kept, indent), tools and
    # documents, a namespace counter, dict().
    "tools_documents_tojson_namespace": (
        "{% set ns = namespace(users=0) %}{% if tools %}Tools:\n{{ tools | tojson(indent=2) }}\n"
        "{% endif %}{% for d in documents or [] %}Doc {{ loop.index }} {{ d.title }}: "
        "{{ d.text }}\n{% endfor %}{% for m in messages %}"
        "{% if m.role == 'user' %}{% set ns.users = ns.users + 1 %}{% endif %}"
        "{{ m | tojson }}\n{% endfor %}{{ dict(users=ns.users) | tojson(sort_keys=True) }}"
    ),
    # Message fields besides role and content: reasoning, tool calls, tool results; a
    # message whose content is None (the key is dropped).
    "message_fields": (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n"
        "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
        "{% if m.thinking %}[{{ m.thinking | length }}]{% endif %}"
        "{% if 'content' in m %}{{ m.content }}{% else %}(no content){% endif %}"
        "{% for c in m.tool_calls or [] %}<call>{{ c.function.name }} "
        "{{ c.function.arguments | tojson }}</call>{% endfor %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    # The special tokens by name, a model-specific one included.
    "special_tokens": (
        "{{ bos_token }}{{ pad_token }}{{ unk_token }}{{ image_token }}"
        "{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}"
    ),
}

MESSAGES = [
    {"role": "system", "content": "be brief & <kind>"},
    {"role": "user", "content": "what is alpha? ünïcødé 🦒"},
    {"role": "assistant", "content": "beta gamma"},
    {"role": "user", "content": "and then?"},
    {"role": "assistant", "content": "return self"},
    {"role": "user", "content": "more"},
]
TOOL_MESSAGES = [
    {"role": "user", "content": "weather in Zürich?"},
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "call the tool",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "weather", "arguments": {"city": "Zürich", "unit": "°C"}},
            }
        ],
    },
    {"role": "tool", "content": "21 <b>sunny</b>"},
    {"role": "assistant", "content": "It is sunny.", "reasoning": "the tool said so"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather <today> in a city, e.g. Zürich.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
DOCUMENTS = [{"title": "Zoo", "text": "Giraffes & zebras"}, {"title": "Ünï", "text": "é"}]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A byte-level BPE tokenizer (any text encodes) with chat special tokens."""
    directory = tmp_path_factory.mktemp("tok")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    texts = [json.dumps(x) for x in (MESSAGES, TOOL_MESSAGES, TOOLS, DOCUMENTS)]
    tok.train_from_iterator(texts * 3, trainer)
    tok.save(str(directory / "tokenizer.json"))
    return directory


def _write(directory, template: str) -> None:
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": {"content": "</s>", "special": True, "__type": "AddedToken"},
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "image_token": "<image>",
        "chat_template": template,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config))


CASES = [
    ("generation", MESSAGES[:5], {}),
    ("loop_controls", MESSAGES, {}),
    ("strftime_now", MESSAGES[:3], {"add_generation_prompt": True}),
    ("tools_documents_tojson_namespace", MESSAGES, {"tools": TOOLS, "documents": DOCUMENTS}),
    ("tools_documents_tojson_namespace", MESSAGES[:2], {}),
    ("message_fields", TOOL_MESSAGES, {"add_generation_prompt": True}),
    ("special_tokens", MESSAGES[1:3], {}),
]


@pytest.mark.parametrize(("name", "messages", "kwargs"), CASES)
def test_renders_token_for_token_as_transformers(tokenizer_dir, name, messages, kwargs):
    from transformers import AutoTokenizer

    _write(tokenizer_dir, TEMPLATES[name])
    reference = AutoTokenizer.from_pretrained(tokenizer_dir)
    tok = zoo_data.load_tokenizer(tokenizer_dir)
    template = tok.compiled_chat_template()
    rendered = template.render(messages, **kwargs)
    want_text = reference.apply_chat_template(messages, tokenize=False, **kwargs)
    assert rendered.text == want_text
    want = reference.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True, **kwargs
    )
    assert tok.encode(rendered.text) == want["input_ids"]
    assert template.has_generation_blocks == (name == "generation")
    if name == "generation":  # the assistant mask from the spans, as transformers marks tokens
        offsets = tok.tokenizer.encode(rendered.text, add_special_tokens=False).offsets
        mask = [
            int(any(start < b and end > a for a, b in rendered.generation_spans))
            for start, end in offsets
        ]
        assert mask == want["assistant_masks"] and 0 < sum(mask) < len(mask)
        said = "".join(rendered.text[a:b] for a, b in rendered.generation_spans)
        assert said == "beta gamma<|im_end|>return self<|im_end|>"


def test_template_errors_are_one_sentence_naming_the_file(tokenizer_dir):
    bad = tokenizer_dir.parent / "bad"
    bad.mkdir()
    (bad / "tokenizer.json").write_text((tokenizer_dir / "tokenizer.json").read_text())
    (bad / "chat_template.jinja").write_text("{% for m in messages %}{% frobnicate %}{% endfor %}")
    tok = zoo_data.load_tokenizer(bad)
    with pytest.raises(zoo_data.ChatTemplateError) as error:
        tok.compiled_chat_template()
    message = str(error.value)
    assert str(bad / "chat_template.jinja") in message and "frobnicate" in message
    assert "\n" not in message and message.endswith(".")
    refusing = "{{ raise_exception('Roles must alternate user/assistant') }}"
    (bad / "chat_template.jinja").write_text(refusing)
    with pytest.raises(zoo_data.ChatTemplateError, match="Roles must alternate") as error:
        zoo_data.load_tokenizer(bad).compiled_chat_template().render(MESSAGES)
    assert str(bad / "chat_template.jinja") in str(error.value)


def test_sandbox_refuses_what_transformers_refuses(tokenizer_dir):
    # A namespace takes no underscore names; the sandbox hides Python internals.
    rng = random.Random()
    name = f"_x{rng.randrange(1000)}"
    for source in (f"{{% set ns = namespace({name}=1) %}}", "{{ messages.__class__.__mro__ }}"):
        template = zoo_data.ChatTemplate(source, origin="t.jinja")
        with pytest.raises(zoo_data.ChatTemplateError, match=r"t\.jinja"):
            template.render(MESSAGES)
