"""The sharding rules: one table from logical axis names (declared by the layers) to mesh axes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._mesh import AXES

MeshAxes = str | tuple[str, ...] | None

#: Key of the rule for arrays whose dimensions have no logical names (a custom model's own
#: arrays): their largest dimension that the mesh axes divide is sharded over these axes.
UNNAMED = "unnamed"

#: The default table. Batch rows go over the data-parallel axes (``expert`` among them: off the
#: experts it is one more data-parallel axis); parameters are fully sharded over ``fsdp`` along
#: the model width (``embed``) and split over ``tensor`` along heads, MLP columns and the
#: vocabulary (Megatron-style tensor parallelism); the experts of a mixture-of-experts layer
#: are split over ``expert``; activations and batches are split along their sequence over
#: ``context``, which also shards parameters like ``fsdp`` (as MaxText's rules do: a
#: long-context run is small-batch, and its devices would otherwise each hold a whole copy of
#: the parameters and optimizer state). At ``context`` 1 nothing changes. A name mapped to
#: ``None`` is replicated.
DEFAULT_RULES: dict[str, MeshAxes] = {
    "batch": ("data", "fsdp", "expert"),
    "experts": "expert",
    "embed": ("fsdp", "context"),
    "vocab": "tensor",
    "heads": "tensor",
    "kv_heads": "tensor",
    "mlp": "tensor",
    "head_dim": None,
    "layers": None,
    "norm": None,
    "position": None,
    "sequence": "context",
    UNNAMED: ("fsdp", "context"),
}


def _axes(name: str, value: Any) -> MeshAxes:
    if value is None or value == "" or value == []:
        return None
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(a, str) for a in items):
        raise ValueError(
            f"sharding rule {name!r} must name mesh axes ({', '.join(AXES)}), a list of them, or "
            f"none; got {value!r}."
        )
    unknown = [a for a in items if a not in AXES]
    if unknown:
        raise ValueError(
            f"sharding rule {name!r} names mesh axis {unknown[0]!r}; the mesh axes are "
            f"{', '.join(AXES)}."
        )
    return items[0] if len(items) == 1 else tuple(items)


def make_rules(overrides: Mapping[str, Any] | None = None) -> dict[str, MeshAxes]:
    """:data:`DEFAULT_RULES` with ``overrides`` applied (values checked against the mesh axes).

    ``overrides`` may add logical names of a custom model's own layers.
    """
    rules = dict(DEFAULT_RULES)
    for name, value in (overrides or {}).items():
        rules[str(name)] = _axes(str(name), value)
    return rules


def rule_axes(rules: Mapping[str, MeshAxes], name: str) -> tuple[str, ...]:
    """The mesh axes ``rules`` give ``name``, as a tuple (empty when replicated)."""
    value = rules.get(name)
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)
