"""Where a mixture-of-experts layer's work goes on a device mesh: which mesh axes shard the
tokens, the experts and the experts' hidden width, read from the active axis rules (the names
``"batch"``, ``"experts"``, ``"mlp"``) and the active mesh."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import jax
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from .._logical import BATCH, EMBED, EXPERTS, MLP_AXIS, SEQUENCE, current_rules, logical_to_spec

Axes = tuple[str, ...]


def _entry(axes: Axes) -> str | Axes | None:
    return None if not axes else axes[0] if len(axes) == 1 else axes


def _axes_of(entry: str | Sequence[str] | None) -> Axes:
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


@dataclasses.dataclass(frozen=True)
class ExpertLayout:
    """The mesh axes of one MoE call (``shard_map`` over every free axis of ``mesh``).

    Attributes:
        mesh: the active (abstract) mesh.
        tokens: axes sharding the tokens (the leading, batch, dimension).
        experts: axes sharding the experts; each device holds ``E / size`` of them.
        hidden: axes sharding the experts' hidden width (partial sums added up).
        embed: axes sharding the experts' model width as stored (fully sharded data
            parallelism): gathered inside the layer, so their gradients leave it sharded.
        sequence: axes sharding the tokens' second dimension (a ``context`` axis splitting
            sequences): each device routes its own part of each sequence.
    """

    mesh: jax.sharding.AbstractMesh
    tokens: Axes
    experts: Axes
    hidden: Axes
    embed: Axes = ()
    sequence: Axes = ()

    @property
    def token_axes(self) -> Axes:
        """Every axis that splits the tokens (rows, then sequences)."""
        return self.tokens + self.sequence

    @property
    def exchange(self) -> Axes:
        """Expert axes that also shard the tokens: the tokens of their devices are gathered
        before the experts run and the results scattered back (the token exchange)."""
        return tuple(a for a in self.experts if a in self.token_axes)

    def size(self, axes: Axes) -> int:
        return math.prod(self.mesh.shape[a] for a in axes)

    def token_spec(self, ndim: int) -> P:
        if ndim >= 2 and self.sequence:
            return P(_entry(self.tokens), _entry(self.sequence), *(None,) * (ndim - 2))
        return P(_entry(self.tokens), *(None,) * (ndim - 1))

    def bias_spec(self) -> P:
        """The spec of ``[E, I]`` expert biases (split like the experts and their hidden width)."""
        return P(_entry(self.experts), _entry(self.hidden))

    def weight_spec(self, hidden_first: bool) -> P:
        experts, hidden, embed = _entry(self.experts), _entry(self.hidden), _entry(self.embed)
        return P(experts, hidden, embed) if hidden_first else P(experts, embed, hidden)


def expert_layout(
    batch: int, ndim: int, n_experts: int, hidden: int, dim: int, length: int = 1
) -> ExpertLayout | None:
    """The layout of a call on ``ndim``-dimensional tokens of ``batch`` rows (of ``length``
    tokens each when ``ndim >= 3``), or ``None`` when no axis rules or no mesh of several
    devices are active (or inside ``shard_map``)."""
    rules = current_rules()
    mesh = jax.sharding.get_abstract_mesh()
    if rules is None or mesh.empty:
        return None
    kinds = zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types, strict=True)
    free = {n: s for n, s, t in kinds if t != AxisType.Manual}
    if len(free) < len(mesh.axis_names) or math.prod(free.values()) == 1:
        return None
    spec = logical_to_spec((BATCH,), (batch, *(1,) * (ndim - 1)), rules, free)
    tokens = _axes_of(spec[0]) if len(spec) else ()

    def fitting(name: str, dim: int, taken: Axes) -> Axes:
        kept: list[str] = []
        for axis in _axes_of(rules.get(name)):
            size = free.get(axis, 1)
            if axis in taken or size == 1:
                continue
            if dim % (math.prod(free[a] for a in kept) * size) == 0:
                kept.append(axis)
        return tuple(kept)

    # A context axis splits the sequences: each device keeps its part (the rules' "sequence").
    sequence = fitting(SEQUENCE, length, tokens) if ndim >= 3 else ()
    experts = fitting(EXPERTS, n_experts, ())
    hidden_axes = fitting(MLP_AXIS, hidden, tokens + sequence + experts)
    # Only axes that split the tokens keep the model width's stored shards into the call: there
    # the gathered weights vary over them as the tokens do. Over any other (a context axis when
    # decoding one token, fsdp when the rows do not split), the output must be the same on
    # every device, which a gather inside cannot promise, so the weights enter gathered.
    embed = tuple(a for a in fitting(EMBED, dim, experts + hidden_axes) if a in tokens + sequence)
    return ExpertLayout(mesh, tokens, experts, hidden_axes, embed, sequence)
