"""The mesh of a command-line run: ``--mesh`` / ``[mesh]`` and ``[sharding]`` into a mesh and
rules, with the checks a user can fail as one sentence each."""

from __future__ import annotations

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


def load_hf_on_mesh(
    path: Any, mesh: Any, rules: Mapping[str, Any], **config_changes: Any
) -> tuple[Any, Any]:
    """A Hugging Face model, each parameter placed on ``mesh`` by the sharding ``rules``, and its
    tokenizer (fitted to the model's vocabulary)."""
    import zoo_models

    from ._finetune import fit_tokenizer
    from .parallel import tree_shardings

    model = zoo_models.load_hf(
        path, shardings=lambda abstract: tree_shardings(abstract, mesh, rules), **config_changes
    )
    tokenizer = fit_tokenizer(zoo_models.load_tokenizer(path), model.config.vocab_size)
    return model, tokenizer
