"""The mesh of a run: ``--mesh`` / ``[mesh]`` and ``[sharding]`` into a mesh and rules, with the
checks a user can fail as one sentence each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._usage import UsageError

#: What to lower when a step's batch does not fit.
LOWER_BATCH = "lower --batch-size, --grad-accum or --seq-len"


def mesh_and_rules(
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
    from ..parallel import MeshConfig, make_mesh, make_rules

    try:
        config = MeshConfig() if text is None else MeshConfig.parse(text)
        return make_mesh(config, devices), make_rules(sharding)
    except ValueError as e:
        raise UsageError.from_error(e) from None


def check_mesh_fits(
    mesh: Any,
    rules: Mapping[str, Any],
    model_config: Any,
    *,
    batch_size: int | None = None,
    seq_len: int | None = None,
) -> None:
    """A batch the data axes cannot split, a sequence the context axes cannot, a model's heads
    the tensor axes cannot, or its experts the expert axes cannot, as a usage error
    (``batch_size=None``, ``seq_len=None``: not checked)."""
    from ..parallel import check_batch, check_experts, check_heads, check_recurrent, check_sequence

    try:
        if batch_size is not None:
            check_batch(batch_size, mesh, rules)
        if seq_len is not None:
            check_sequence(seq_len, mesh, rules)
        check_heads(model_config.n_heads, model_config.kv_heads, mesh, rules)
        check_experts(getattr(model_config, "n_experts", 0), mesh, rules)
        check_recurrent(getattr(model_config, "n_linear_layers", 0), mesh, rules)
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


def check_train_positions(model_config: Any, seq_len: int, *, settable: bool) -> None:
    """Training rows longer than the model's positions as a usage error, whatever its position
    encoding: a rotary model trained past ``max_position`` records a context it was never given,
    and generation from the run stops at it. ``settable``: the run may raise the limit with
    ``model_config.max_position`` (a preset, or a rotary Hugging Face model), which the run and
    its exports then record."""
    limit = model_config.max_position
    if seq_len <= limit:
        return
    fix = (
        f"lower --seq-len or raise the limit with --set model_config.max_position={seq_len}"
        if settable
        else "lower --seq-len"
    )
    raise UsageError(f"--seq-len {seq_len} is longer than the model's {limit} positions; {fix}.")
