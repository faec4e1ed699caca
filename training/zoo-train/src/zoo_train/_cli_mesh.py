"""The mesh of a command-line run: ``--mesh`` / ``[mesh]`` and ``[sharding]`` into a mesh and
rules, with the checks a user can fail as one sentence each."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from ._usage import UsageError


def cli_mesh(
    text: str | None,
    sharding: Mapping[str, Any] | None = None,
    *,
    devices: Sequence[Any] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """``(mesh, rules)`` for ``--mesh TEXT`` (``None``: the default mesh) and ``[sharding]``.

    Raises:
        UsageError: a malformed mesh, one that does not match the device count, or a rule that
            names an unknown mesh axis.
    """
    from .parallel import MeshConfig, make_mesh, make_rules

    try:
        config = MeshConfig() if text is None else MeshConfig.parse(text)
        return make_mesh(config, devices), make_rules(sharding)
    except ValueError as e:
        raise UsageError.from_error(e) from None


def check_mesh_fits(
    mesh: Any, rules: Mapping[str, Any], model_config: Any, *, batch_size: int | None = None
) -> None:
    """A batch the data axes cannot split, or a model's heads the tensor axes cannot, as a usage
    error (``batch_size=None``: only the heads)."""
    from .parallel import check_batch, check_heads

    try:
        if batch_size is not None:
            check_batch(batch_size, mesh, rules)
        check_heads(model_config.n_heads, model_config.kv_heads, mesh, rules)
    except ValueError as e:
        raise UsageError.from_error(e) from None


def check_positions(model_config: Any, seq_len: int) -> None:
    """Rows longer than a learned position table (GPT-2) as a usage error: the lookups past
    its end would be clamped into garbage (a ``nan`` loss), not refused."""
    if model_config.positional == "learned" and seq_len > model_config.max_position:
        raise UsageError(
            f"seq_len {seq_len} exceeds the model's {model_config.max_position} positions; "
            "lower --seq-len or raise model_config.max_position."
        )


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
