"""``ZooLM``: lm-eval's ``TemplateLM`` on a zoo model, scoring and generating on a device mesh.

Tokenization follows lm-eval's Hugging Face backend (BOS as the tokenizer's configuration adds
it, left truncation to the model's positions, the same rolling windows and stop strings), so a
task gives the numbers that backend gives on the same checkpoint. Every process computes the
same requests in the same order (lm-eval sees one rank); the mesh splits each batch's rows over
the devices of all processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jax.sharding import Mesh
from lm_eval.api.model import TemplateLM
from lm_eval.models.utils import (
    handle_stop_sequences,
    normalize_gen_kwargs,
    postprocess_generated_text,
)
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from zoo_data import leading_bos

from ..parallel import make_mesh, make_rules
from ._chat_prompts import render_history
from ._generation import Generator, Sampling
from ._scoring import Scorer

#: lm-eval's default number of new tokens when a task names none.
MAX_GEN_TOKS = 256


class ZooLM(TemplateLM):
    """A zoo model (``model(ids [B, T]) -> logits [B, T, V]``, ``init_cache``/``decode`` for
    generation) and its tokenizer, as an lm-eval model.

    Args:
        model: the model, its arrays placed on ``mesh`` (e.g. ``load_run(mesh=...)``).
        tokenizer: a zoo tokenizer (``encode``, ``decode``, ``bos_id``, ``eos_id``).
        mesh, rules: where it runs (default: every device) and the sharding rules.
        batch_size: requests per forward pass or generation batch (rounded up to a multiple of
            the batch's shards).
        stop_tokens: ids that end a generation (default: the tokenizer's EOS).
        max_length: positions used (default: the model's ``config.max_position``).
        seed: the key of sampled generation.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        mesh: Mesh | None = None,
        rules: Mapping[str, Any] | None = None,
        batch_size: int = 16,
        stop_tokens: Sequence[int] | None = None,
        max_length: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        mesh = make_mesh() if mesh is None else mesh
        rules = make_rules(rules)
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.seed = seed
        self._max_length = max_length or int(model.config.max_position)
        if stop_tokens is None:
            stop_tokens = () if tokenizer.eos_id is None else (tokenizer.eos_id,)
        self.scorer = Scorer(model, mesh, rules, max_length=self._max_length)
        self.generator = Generator(
            model, mesh, rules, max_length=self._max_length, stop_tokens=stop_tokens
        )

    @property
    def model(self) -> Any:
        """The model scored and generated with; replacing it (the same structure, new values,
        as a training step gives) reuses the compiled programs."""
        return self.scorer.model

    @model.setter
    def model(self, model: Any) -> None:
        self.scorer.model = model
        self.generator.model = model

    @property
    def eot_token_id(self) -> int:
        return int(self.tokenizer.eos_id)

    @property
    def prefix_token_id(self) -> int:
        bos = self.tokenizer.bos_id
        return int(bos if bos is not None else self.tokenizer.eos_id)

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def tokenizer_name(self) -> str:
        return type(self.tokenizer).__name__

    def tok_encode(
        self,
        string: str,
        add_special_tokens: bool | None = None,
        left_truncate_len: int | None = None,
        **kwargs: Any,
    ) -> list[int]:
        """Token ids of ``string``, BOS first when the tokenizer adds one (``None``: unless the
        text already starts with it), cut to the last ``left_truncate_len``."""
        bos = leading_bos(self.tokenizer)
        if add_special_tokens is None:
            prefix = self.tok_decode([self.prefix_token_id], skip_special_tokens=False)
            add_special_tokens = not string.startswith(prefix)
        ids = list(self.tokenizer.encode(string))
        if add_special_tokens and bos is not None:
            ids = [bos, *ids]
        return ids[-left_truncate_len:] if left_truncate_len else ids

    def tok_decode(self, tokens: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ``tokens``."""
        return str(self.tokenizer.decode(list(tokens), skip_special=skip_special_tokens))

    def _loglikelihood_tokens(
        self, requests: Sequence[tuple[Any, list[int], list[int]]], **kwargs: Any
    ) -> list[tuple[float, bool]]:
        results = self.scorer.score([(c, x) for _, c, x in requests], self.batch_size)
        for (key, _, _), answer in zip(requests, results, strict=True):
            if key is not None:
                self.cache_hook.add_partial("loglikelihood", key, answer)
        return results

    def loglikelihood_rolling(
        self, requests: Sequence[Any], disable_tqdm: bool = False
    ) -> list[float]:
        """The log-likelihood of each request's whole text, in disjoint windows of the model's
        positions (every window of every request scored in the same batches)."""
        windows: list[tuple[list[int], list[int]]] = []
        owners: list[int] = []
        for n, request in enumerate(requests):
            (text,) = request.args
            tokens = self.tok_encode(text)
            for window in get_rolling_token_windows(
                token_list=tokens,
                prefix_token=self.prefix_token_id,
                max_seq_len=self.max_length,
                context_len=1,
            ):
                windows.append(make_disjoint_window(window))
                owners.append(n)
        totals = [0.0] * len(requests)
        for n, (logp, _) in zip(owners, self.scorer.score(windows, self.batch_size), strict=True):
            totals[n] += logp
        for request, total in zip(requests, totals, strict=True):
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, total)
        return totals

    def generate_until(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[str]:
        """Each request's continuation of its context, cut at the first of its ``until``
        strings (or the end of text); requests with the same settings run together."""
        groups: dict[str, list[int]] = {}
        for n, request in enumerate(requests):
            groups.setdefault(repr(sorted(request.args[1].items())), []).append(n)
        out = [""] * len(requests)
        eos = self.tok_decode([self.eot_token_id], skip_special_tokens=False)
        for g, members in enumerate(groups.values()):
            kwargs = dict(normalize_gen_kwargs(requests[members[0]].args[1], MAX_GEN_TOKS))
            until = handle_stop_sequences(kwargs.pop("until", None), eos=eos)
            sampling = _sampling(kwargs, self.seed + g)
            contexts = [requests[n].args[0] for n in members]
            new = self.generator.generate(
                [self.tok_encode(c) for c in contexts], sampling, self.batch_size
            )
            for n, tokens in zip(members, new, strict=True):
                text = postprocess_generated_text(self.tok_decode(tokens), until, None)
                out[n] = text
                self.cache_hook.add_partial("generate_until", requests[n].args, text)
        return out

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        """``chat_history`` in the tokenizer's chat format (see :func:`render_history`)."""
        return render_history(
            self.tokenizer, chat_history, add_generation_prompt=add_generation_prompt
        )


def _sampling(kwargs: Mapping[str, Any], seed: int) -> Sampling:
    """The decoding of normalized lm-eval generation settings: greedy unless ``do_sample``
    with a positive temperature."""
    temperature = float(kwargs.get("temperature") or 0.0)
    greedy = not kwargs.get("do_sample") or temperature <= 0.0
    return Sampling(
        max_new_tokens=int(kwargs["max_gen_toks"]),
        greedy=greedy,
        temperature=1.0 if greedy else temperature,
        top_k=kwargs.get("top_k"),
        top_p=kwargs.get("top_p"),
        seed=seed,
    )
