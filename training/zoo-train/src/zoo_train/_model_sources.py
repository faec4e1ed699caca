"""Models that already exist: a Hugging Face directory or a zoo run, loaded onto a mesh with
their tokenizer."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping
from typing import Any

from ._usage import UsageError
from .parallel import make_mesh, make_rules


def tokenizer_source(model_dir: Any, tokenizer: str | None = None) -> pathlib.Path:
    """Where the tokenizer of the Hugging Face directory ``model_dir`` is read from:
    ``tokenizer`` (``--tokenizer PATH``: a directory or a ``tokenizer.json``) when given, else
    the directory itself.

    Raises:
        UsageError: no ``tokenizer.json`` there. Byte ids are never substituted: their
            BOS/EOS ids would collide with the model's real vocabulary.
    """
    if tokenizer is not None:
        path = pathlib.Path(tokenizer)
        if path.is_file() or (path / "tokenizer.json").is_file():
            return path
        raise UsageError(
            f"--tokenizer {tokenizer!r} is neither a tokenizer.json file nor a directory holding "
            "one; pass the model's tokenizer."
        )
    path = pathlib.Path(model_dir)
    if not (path / "tokenizer.json").is_file():
        raise UsageError(
            f"{str(path)!r} has no tokenizer (tokenizer.json); pass --tokenizer PATH naming the "
            "model's tokenizer directory or tokenizer.json."
        )
    return path


def load_hf_on_mesh(
    path: Any,
    mesh: Any,
    rules: Mapping[str, Any],
    *,
    tokenizer: str | None = None,
    **config_changes: Any,
) -> tuple[Any, Any]:
    """A Hugging Face model, each parameter placed on ``mesh`` by the sharding ``rules``, and its
    tokenizer (from ``tokenizer`` if given, see :func:`tokenizer_source`)."""
    import zoo_models

    from .parallel import tree_shardings
    from .peft import fit_tokenizer

    source = tokenizer_source(path, tokenizer)
    model = zoo_models.load_hf(
        path, shardings=lambda abstract: tree_shardings(abstract, mesh, rules), **config_changes
    )
    try:
        tok = fit_tokenizer(zoo_models.load_tokenizer(source), model.config.vocab_size)
    except ValueError as e:
        raise UsageError.from_error(e) from None
    return model, tok


def checkpoint_dtype_of(source: pathlib.Path) -> str:
    """The parameter dtype the Hugging Face directory ``source`` declares (float32 if none)."""
    import zoo_models

    try:
        declared = zoo_models.checkpoint_dtype(json.loads((source / "config.json").read_text()))
    except (OSError, ValueError):
        declared = None  # load_hf reports an unreadable config.json in its own words
    return declared or "float32"


def load_model(
    path: str,
    *,
    attention_implementation: str | None = None,
    mesh: Any = None,
    rules: dict[str, Any] | None = None,
    tokenizer: str | None = None,
    step: int | None = None,
) -> tuple[Any, Any, str]:
    """A model and tokenizer from a zoo run directory (its newest checkpoint, or that of
    ``step``) or a Hugging Face directory, its parameters placed on ``mesh`` by the sharding
    ``rules`` (default: every device); ``tokenizer`` (a directory or ``tokenizer.json``)
    replaces the source's tokenizer.

    Returns:
        ``(model, tokenizer, description)``.
    """
    from ._run_directory import checkpoint_steps, load_run, no_model_error

    mesh = make_mesh() if mesh is None else mesh
    rules = make_rules(rules)
    p = pathlib.Path(path)
    if (p / "config.json").is_file():
        if step is not None:
            raise UsageError(
                f"{str(p)!r} is a Hugging Face directory, which has no steps; drop --step."
            )
        model, tok = load_hf_on_mesh(
            p, mesh, rules, tokenizer=tokenizer, attention_implementation=attention_implementation
        )
        return model, tok, f"Hugging Face model {p}"
    if checkpoint_steps(p):
        loaded = load_run(
            p,
            attention_implementation=attention_implementation,
            mesh=mesh,
            rules=rules,
            step=step,
        )
        tok = loaded.tokenizer
        if tokenizer is not None:
            import zoo_models

            tok = zoo_models.load_tokenizer(tokenizer_source(p, tokenizer))
        return loaded.model, tok, f"run {p} at step {loaded.step}"
    raise no_model_error(p)
