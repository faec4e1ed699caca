"""``zoo generate``: text from a model; with ``--chat``, a reply in the model's chat format, and
a conversation at the terminal when no prompt is given."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from .._chat_prompt import chat_prompt_ids, end_of_turn_ids
from .._usage import UsageError
from ..settings import SEEDS, bounded
from ._options import add_mesh_flag, add_tokenizer_flag, load_source

DEFAULT_PROMPT = "def "


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "source", metavar="RUN_OR_HF_DIR", help="a zoo run directory or a Hugging Face directory"
    )
    p.add_argument(
        "--prompt",
        default=None,
        metavar="TEXT",
        help=f"prompt text (default: {DEFAULT_PROMPT!r}; with --chat: the user's message, read "
        "from standard input when it is not a terminal; on a terminal, none: ask, line by line)",
    )
    p.add_argument(
        "--chat",
        action="store_true",
        help="render the prompt with the model's chat template and reply as the assistant",
    )
    p.add_argument(
        "--system", default=None, metavar="TEXT", help="with --chat: a system message first"
    )
    p.add_argument(
        "--max-new-tokens",
        type=bounded(int, "[1, inf)"),
        default=200,
        metavar="N",
        help="tokens to generate at most (default: 200), capped at the model's positions and at "
        "what memory holds, with a note",
    )
    p.add_argument(
        "--temperature", type=bounded(float, "(0, inf)"), default=0.8, help="(default: 0.8)"
    )
    p.add_argument(
        "--top-k",
        type=bounded(int, "[1, inf)"),
        default=None,
        metavar="K",
        help="keep the K likeliest (default: all)",
    )
    p.add_argument(
        "--top-p",
        type=bounded(float, "(0, 1]"),
        default=None,
        metavar="P",
        help="keep the likeliest with mass P (default: 1, all)",
    )
    p.add_argument("--greedy", action="store_true", help="argmax decoding")
    p.add_argument(
        "--num-samples", type=bounded(int, "[1, inf)"), default=1, metavar="N", help="(default: 1)"
    )
    p.add_argument("--seed", type=bounded(int, SEEDS), default=0, help="(default: 0)")
    p.add_argument("--attention-implementation", metavar="KERNEL", default=None)
    add_tokenizer_flag(p)
    add_mesh_flag(p, default=None)


@dataclasses.dataclass
class _Generator:
    """A loaded model and how to sample from it."""

    args: argparse.Namespace
    model: Any
    tokenizer: Any
    stops: tuple[int, ...]

    def sampling(self, seed: int) -> dict[str, Any]:
        """The sampling settings of the command line, with ``seed``."""
        a = self.args
        return {
            "max_new_tokens": a.max_new_tokens,
            "temperature": a.temperature,
            "top_k": a.top_k,
            "top_p": a.top_p,
            "greedy": a.greedy,
            "seed": seed,
            "stop_tokens": self.stops,
        }

    def reply(self, ids: list[int], seed: int) -> str:
        """The model's reply to the prompt ``ids``."""
        # Loads JAX and the models: not on the `zoo generate --help` path.
        from .._inference import continue_ids

        return self.tokenizer.decode(
            continue_ids(self.model, ids, **self.sampling(seed), pad_to=64)
        )

    def continuation(self, prompt: str, seed: int) -> str:
        """The text continuing ``prompt``."""
        # Loads JAX and the models: not on the `zoo generate --help` path.
        from .._inference import sample_text

        return sample_text(self.model, self.tokenizer, prompt, **self.sampling(seed))


def run_generate(args: argparse.Namespace) -> int:
    """Print continuations of the prompt, replies with ``--chat``, or hold a conversation."""
    # parallel loads JAX: not on the `zoo generate --help` path.
    from ..parallel import mesh_context

    if args.system is not None and not args.chat:
        raise UsageError("--system is a chat message; add --chat or drop --system.")
    interactive = args.prompt is None and sys.stdin.isatty()
    prompt = args.prompt
    if prompt is None and not interactive:
        prompt = sys.stdin.read().strip() if args.chat else DEFAULT_PROMPT
        if not prompt:
            raise UsageError("zoo generate --chat got no message; pass --prompt TEXT.")
    mesh, rules, model, tokenizer, what = load_source(args)
    generator = _Generator(args, model, tokenizer, _stops(args, tokenizer))
    print(f"zoo: {'chatting with' if args.chat else 'sampling from'} {what}", file=sys.stderr)
    with mesh_context(mesh, rules):
        if interactive:
            _converse(generator)
        elif args.chat:
            for i in range(args.num_samples):
                ids = _chat_ids(tokenizer, [*_opening(args), _user(prompt)])
                _print_sample(args, i, generator.reply(ids, args.seed + i).strip())
        else:
            for i in range(args.num_samples):
                _print_sample(args, i, prompt + generator.continuation(prompt, args.seed + i))
    return 0


def _stops(args: argparse.Namespace, tokenizer: Any) -> tuple[int, ...]:
    """Where transformers stops on the same checkpoint (its generation settings); with
    --chat also at the template's end of turn."""
    # Loads JAX and the models: not on the `zoo generate --help` path.
    import zoo_models

    from .._run_directory import read_generation

    stops = zoo_models.stop_token_ids(read_generation(args.source), tokenizer)
    if args.chat:
        stops = (*stops, *(t for t in end_of_turn_ids(tokenizer) if t not in stops))
    return tuple(stops)


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _opening(args: argparse.Namespace) -> list[dict[str, str]]:
    return [] if args.system is None else [{"role": "system", "content": args.system}]


def _chat_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    return chat_prompt_ids(tokenizer, messages)


def _print_sample(args: argparse.Namespace, i: int, text: str) -> None:
    if args.num_samples > 1:
        print(f"--- sample {i + 1} ---")
    print(text, flush=True)


def _converse(generator: _Generator, read: Callable[[str], str] = input) -> None:
    """One prompt per line until an empty line or end of input; with --chat the turns build a
    conversation the model sees whole."""
    args = generator.args
    messages = _opening(args)
    kind = "message" if args.chat else "prompt"
    print(f"zoo: type a {kind} and Enter; an empty line or Ctrl-D ends.", file=sys.stderr)
    turn = 0
    while True:
        try:
            line = read("> ")
        except EOFError:
            print(file=sys.stderr)
            return
        if not line.strip():
            return
        if args.chat:
            messages.append(_user(line))
            reply = generator.reply(_chat_ids(generator.tokenizer, messages), args.seed + turn)
            messages.append({"role": "assistant", "content": reply.strip()})
            print(reply.strip(), flush=True)
        else:
            print(line + generator.continuation(line, args.seed + turn), flush=True)
        turn += 1
