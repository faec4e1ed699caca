"""``zoo generate --chat``: the prompt rendered with the model's chat template and generation
prompt, greedy replies equal to transformers' on the same conversation, stopping at the end of
turn; a conversation at the terminal; the defaults in ``--help``."""

from __future__ import annotations

import io

import pytest

import zoo_models
from zoo_train._chat_prompt import end_of_turn_ids
from zoo_train.cli import build_parser, main
from zoo_train.testing import tiny_hf_llama

NEW = 6


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    return tiny_hf_llama(tmp_path_factory.mktemp("chat") / "hf")


def _transformers_reply(hf, messages) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hf)
    model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    stops = [tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")]
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=NEW, do_sample=False, eos_token_id=stops
        )
    return tok.decode(out[0, len(ids) :], skip_special_tokens=True).strip()


def test_chat_replies_as_transformers_and_stops_at_the_end_of_turn(hf, capsys):
    tok = zoo_models.load_tokenizer(hf)
    assert end_of_turn_ids(tok) == (tok.tokenizer.token_to_id("<|im_end|>"),)
    assert end_of_turn_ids(zoo_models.ByteTokenizer()) == (10,)  # the plain format's newline
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "alpha?"}]
    args = ["generate", str(hf), "--chat", "--greedy", "--max-new-tokens", str(NEW)]
    assert main([*args, "--system", "be brief", "--prompt", "alpha?"]) == 0
    assert capsys.readouterr().out.strip() == _transformers_reply(hf, messages)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_conversation_at_the_terminal_sees_every_turn(hf, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", _Terminal("alpha beta?\nand gamma?\n\n"))
    args = ["generate", str(hf), "--chat", "--greedy", "--max-new-tokens", str(NEW)]
    assert main(args) == 0
    out = capsys.readouterr().out
    first, second, end = out.split("> ")[1:]  # after each prompt for a line
    assert end == "", out
    history = [{"role": "user", "content": "alpha beta?"}]
    assert first.strip() == _transformers_reply(hf, history)
    history += [{"role": "assistant", "content": first.strip()}]
    history += [{"role": "user", "content": "and gamma?"}]
    assert second.strip() == _transformers_reply(hf, history)


def test_generate_help_shows_the_defaults():
    text = build_parser()._subparsers._group_actions[0].choices["generate"].format_help()
    text = " ".join(text.split())
    for shown in ("(default: 200)", "(default: 0.8)", "K likeliest (default: all)", "--chat"):
        assert shown in text, shown
