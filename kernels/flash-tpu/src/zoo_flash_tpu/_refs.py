"""Named kernel operands: a wrapper and its kernel body agree on names, not on positions.

Pallas hands a kernel its refs positionally (scalar prefetch, inputs, outputs, scratch). The
wrappers in ``_calls.py`` declare each operand once, with its name, BlockSpec and array, in an
:class:`Operands`; :func:`call` builds the ``pallas_call`` from it and the kernel body receives a
:class:`Refs` it reads by name (``refs.q``, ``refs.lse``), so adding an optional operand cannot
shift the others.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from ._config import FlashConfig

# Pallas's own name for these (its LiteralDimensionSemantics) is private; the two the kernels use.
Semantics = tuple[Literal["parallel", "arbitrary"], ...]


class Refs:
    """The refs of one grid step, by operand name (an absent name raises ``AttributeError``)."""

    def __init__(self, names: Sequence[str], refs: Sequence[Any]) -> None:
        self._refs = dict(zip(names, refs, strict=True))

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_refs"][name]
        except KeyError:
            raise AttributeError(f"kernel has no operand {name!r}") from None


@dataclasses.dataclass
class Operands:
    """A ``pallas_call``'s operands in declaration order within each kind."""

    prefetch: list[tuple[str, jax.Array]] = dataclasses.field(default_factory=list)
    inputs: list[tuple[str, pl.BlockSpec, jax.Array]] = dataclasses.field(default_factory=list)
    outputs: list[tuple[str, pl.BlockSpec, jax.ShapeDtypeStruct]] = dataclasses.field(
        default_factory=list
    )
    scratch: list[tuple[str, Any]] = dataclasses.field(default_factory=list)

    def names(self) -> tuple[str, ...]:
        """Every operand's name in the order Pallas passes the refs."""
        kinds = (self.prefetch, self.inputs, self.outputs, self.scratch)
        return tuple(entry[0] for kind in kinds for entry in kind)


def _bound(*refs: Any, body: Callable[..., None], names: tuple[str, ...], **static: Any) -> None:
    body(Refs(names, refs), **static)


def call(
    body: Callable[..., None],
    ops: Operands,
    *,
    grid: tuple[int, ...],
    semantics: Semantics,
    cfg: FlashConfig,
    cost: pl.CostEstimate,
    name: str,
    **static: Any,
) -> list[jax.Array]:
    """Run ``body(refs, cfg=cfg, **static)`` over ``grid``; returns the outputs in order."""
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=len(ops.prefetch),
        grid=grid,
        in_specs=[spec for _, spec, _ in ops.inputs],
        out_specs=[spec for _, spec, _ in ops.outputs],
        scratch_shapes=[shape for _, shape in ops.scratch],
    )
    kernel = functools.partial(_bound, body=body, names=ops.names(), cfg=cfg, **static)
    outs = pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=[shape for _, _, shape in ops.outputs],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=semantics, vmem_limit_bytes=cfg.vmem_limit_bytes
        ),
        cost_estimate=cost,
        interpret=cfg.interpret if cfg.interpret is not None else False,
        name=name,
    )(*[array for _, array in ops.prefetch], *[array for _, _, array in ops.inputs])
    return list(outs)
