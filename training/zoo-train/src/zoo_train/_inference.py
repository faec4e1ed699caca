"""Using a trained language model: held-out loss and perplexity, and sampled text."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jaxtyping import Array, Bool, Int, PRNGKeyArray

import zoo_models
from zoo_data import leading_bos

from ._capacity import free_memory
from ._loss import make_lm_loss
from ._precision import resolve_compute_dtype
from .loop import EvalData
from .parallel import (
    BatchLayout,
    MeshFunction,
    batch_shardings,
    make_mesh,
    platform_of,
    replicated,
    to_host,
)

logger = logging.getLogger("zoo_train")


def evaluate_model(
    model: Any,
    source: EvalData,
    *,
    batch_size: int,
    max_batches: int | None = None,
    compute_dtype: str = "auto",
    mesh: Mesh | None = None,
    rules: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    """Token-mean cross entropy of ``model`` over ``source.eval_batches(batch_size)`` (every
    source's, when ``source`` maps names to several).

    With a ``mesh`` (and sharding ``rules``) the batches are split over its data-parallel axes
    and the model is used where its arrays are (shard it first, e.g. ``load_run(mesh=...)``).

    Returns:
        ``{"loss", "ppl", "tokens"}``: the mean next-token loss (nats), ``exp(loss)`` and the
        number of counted target tokens.
    """
    mesh = make_mesh() if mesh is None else mesh
    rules = rules or {}
    # The held-out loss alone: no router losses of a mixture of experts.
    loss = make_lm_loss(
        compute_dtype=resolve_compute_dtype(compute_dtype, platform_of(mesh)), router_aux_loss=0.0
    )
    loss_fn = MeshFunction(
        lambda m, b: loss(m, b, jax.random.key(0)),
        mesh=mesh,
        rules=rules,
        in_shardings=(None, lambda b: batch_shardings(b, mesh, rules)),
        out_shardings=replicated(mesh),
    )
    layout = BatchLayout(mesh, rules, batch_size)
    total, weight = 0.0, 0.0
    sources = source.values() if isinstance(source, Mapping) else [source]
    for part in sources:
        for batch in part.eval_batches(batch_size, max_batches=max_batches):
            loss_sum, aux = loss_fn(model, layout.place(layout.local_part(batch)))
            total += float(loss_sum)
            weight += float(aux["weight"])
    if weight <= 0:
        raise ValueError("The evaluation data has no counted tokens; give it longer documents.")
    mean = total / weight
    return {"loss": mean, "ppl": math.exp(min(mean, 700.0)), "tokens": weight}


def new_token_budget(model: Any, prompt_len: int, requested: int) -> tuple[int, str | None]:
    """How many of ``requested`` new tokens a prompt of ``prompt_len`` tokens can have, and why
    fewer (``None``: all of them).

    The model's positions end it (a rotary model's too: beyond ``max_position`` it was never
    trained, and its cache would grow without bound), and so does memory: the KV cache of
    prompt and continuation may take half of what the device, or this process on the host,
    can still allocate (XLA may hold a copy of it).

    Raises:
        ValueError: the prompt alone fills the positions.
        zoo_models.DoesNotFitError: not even one new token's cache fits.
    """
    config = getattr(model, "config", None)
    if config is None:
        return requested, None
    room = config.max_position - prompt_len
    if room < 1:
        raise ValueError(
            f"The prompt ({prompt_len} tokens) fills the model's {config.max_position} "
            "positions; shorten it."
        )
    budget, why = requested, None
    if room < budget:
        budget = room
        why = f"the model has {config.max_position} positions and the prompt takes {prompt_len}"
    dtype = jnp.dtype(getattr(model, "compute_dtype", None) or jnp.float32)
    per_token = config.n_attention_layers * config.cache_width * dtype.itemsize
    free, what = free_memory()
    if free is None:
        return budget, why
    fits = free // 2 // per_token - prompt_len
    if fits < 1:
        raise zoo_models.DoesNotFitError(
            f"The cache of a {prompt_len}-token prompt needs "
            f"{zoo_models.human_bytes(2 * prompt_len * per_token)} with its copy, more than "
            f"{what} ({zoo_models.human_bytes(free)}); shorten the prompt."
        )
    if fits < budget:
        budget = fits
        why = (
            f"the cache of {prompt_len + fits:,} tokens ({zoo_models.human_bytes(per_token)} "
            f"each) takes half of {what} ({zoo_models.human_bytes(free)})"
        )
    return budget, why


def sample_text(model: Any, tokenizer: Any, prompt: str, **settings: Any) -> str:
    """Continue ``prompt`` by up to ``max_new_tokens`` tokens (stopping at EOS); the new text.

    ``settings`` are those of :func:`sample_ids` (``max_new_tokens``, ``temperature``,
    ``top_k``, ``top_p``, ``greedy``, ``seed``, ``stop_tokens``).
    """
    return tokenizer.decode(sample_ids(model, tokenizer, prompt, **settings))


def sample_ids(
    model: Any,
    tokenizer: Any,
    prompt: str,
    *,
    max_new_tokens: int,
    temperature: float = 0.8,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    seed: int = 0,
    stop_tokens: Sequence[int] | None = None,
) -> list[int]:
    """The new token ids continuing ``prompt`` (the stop token and what follows it left out).

    Generation stops at any of ``stop_tokens`` (default: the tokenizer's EOS); pass
    ``zoo_models.stop_token_ids`` of the checkpoint's generation settings to stop where
    ``transformers`` does (e.g. at an end-of-turn token).

    Generation stops at the model's ``max_position`` and at the longest cache memory holds
    (see :func:`new_token_budget`; a cap is logged).

    The prompt is encoded as the tokenizer's configuration says (BOS first when it adds one),
    as ``transformers`` does, so greedy ids match its ``generate`` on the same model.
    """
    ids = tokenizer.encode(prompt)
    bos = leading_bos(tokenizer)  # as the training data had it
    if bos is not None:
        ids = [bos, *ids]
    if not ids:
        raise ValueError(
            "The prompt is empty and the tokenizer has no BOS token; pass --prompt TEXT."
        )
    if stop_tokens is None:
        stop_tokens = zoo_models.stop_token_ids({}, tokenizer)
    return continue_ids(
        model,
        ids,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        greedy=greedy,
        seed=seed,
        stop_tokens=stop_tokens,
    )


def continue_ids(
    model: Any,
    ids: Sequence[int],
    *,
    max_new_tokens: int,
    temperature: float = 0.8,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    seed: int = 0,
    stop_tokens: Sequence[int] = (),
    pad_to: int | None = None,
) -> list[int]:
    """The new token ids continuing the prompt ``ids`` (up to the first of ``stop_tokens``,
    which is left out); settings as :func:`sample_ids`. ``pad_to`` left-pads the prompt to a
    multiple of that many tokens (masked out: the same tokens), so that prompts of similar
    lengths, such as the turns of a conversation, reuse one compiled generation loop."""
    ids = list(ids)
    config = getattr(model, "config", None)
    learned = config is not None and config.positional == "learned"
    budget, why = new_token_budget(model, len(ids), max_new_tokens)
    if why is not None:
        logger.warning("generating at most %d new tokens, not %d: %s", budget, max_new_tokens, why)
    max_new_tokens = budget
    stops = tuple(int(t) for t in stop_tokens)
    pad = 0 if pad_to is None or learned else -len(ids) % pad_to
    out = zoo_models.generate(
        model,
        jnp.asarray([[0] * pad + ids], jnp.int32),
        prompt_mask=jnp.asarray([[False] * pad + [True] * len(ids)]),
        max_new_tokens=max_new_tokens,
        key=jax.random.key(seed),
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        greedy=greedy,
        stop_tokens=stops,
    )
    new = [int(t) for t in to_host(out)[0, pad + len(ids) :]]
    ends = [i for i, t in enumerate(new) if t in stops]
    return new[: ends[0]] if ends else new


@eqx.filter_jit
def traced_generate(
    model: Any,
    ids: Int[Array, "B T"],
    mask: Bool[Array, "B T"],
    key: PRNGKeyArray,
    sampling: Any,
    stop_tokens: tuple[int, ...],
) -> Int[Array, "B T+N"]:
    """``zoo_models.generate`` traced as one program, compiled once per shape and settings:
    the prompt arrays, which on several processes span devices this process cannot read, are
    never read on the host (the caller builds them left-padded). ``sampling`` is a hashable
    object with ``max_new_tokens``, ``temperature``, ``top_k``, ``top_p`` and ``greedy``; rows
    that end are padded with the first stop token."""
    return zoo_models.generate(
        model,
        ids,
        prompt_mask=mask,
        max_new_tokens=sampling.max_new_tokens,
        key=key,
        temperature=sampling.temperature,
        top_k=sampling.top_k,
        top_p=sampling.top_p,
        greedy=sampling.greedy,
        stop_tokens=stop_tokens,
    )
