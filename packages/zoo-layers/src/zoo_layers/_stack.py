"""``LayerStack``: ``n_layers`` blocks kept as stacked parameters, applied by ``jax.lax.scan``
or by an unrolled loop.

Scanned, the block body is traced once however deep the stack, so compile time stays flat in
depth. Unrolled, every layer is its own code: compile time grows with depth, but XLA:CPU runs
the step faster, because a scan's backward pass writes every layer's residuals into stacked,
zero-initialised buffers and reads the weights back through dynamic slices (memory traffic a
CPU pays for in full). The parameters are stacked either way, so checkpoints do not depend on
the choice. The default (``scan=None``) scans on accelerators and unrolls on CPU.

Layers that differ in static configuration (Gemma 2 alternates a sliding-window layer and a
global one, and the window is static in the attention contract) are handled by scanning over
*groups*: the stack has a ``period`` P, keeps P stacked blocks ``blocks[p]`` (layer
``l = g * P + p`` is group ``g`` of ``blocks[p]``), and the scan body applies the P blocks of a
group in order. When ``n_layers`` is not a multiple of ``period`` (Gemma 3's 26 layers repeat a
pattern of 6), the last ``n_layers % period`` layers form a *tail*: blocks of the first phases,
each stacked with a leading axis of one, applied unrolled after the scan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

import zoo_attention

from ._block import TransformerBlock
from ._logical import BATCH, SEQUENCE, logical_axes, logical_constraint, stacked_axes
from .moe import RouterStats

_T = TypeVar("_T")
# A scan's carry, its per-group inputs and its per-group outputs.
_C = TypeVar("_C")
_X = TypeVar("_X")
_Y = TypeVar("_Y")


def _split(key: PRNGKeyArray, n_layers: int, period: int) -> tuple[Array, Array]:
    """One key per layer: the scanned layers' shaped ``[n_layers // period, period, ...]``, the
    tail's ``[1, n_layers % period, ...]``."""
    keys = jax.random.split(key, n_layers)
    whole = n_layers - n_layers % period
    return (
        keys[:whole].reshape(n_layers // period, period, *keys.shape[1:]),
        keys[whole:].reshape(1, n_layers % period, *keys.shape[1:]),
    )


def _check_depth(n_layers: int, period: int) -> None:
    if period <= 0 or n_layers < period:
        raise ValueError(
            f"`n_layers` ({n_layers}) must be at least `period` ({period}), and `period` positive."
        )


def layer_slot(layer: int, n_layers: int, period: int) -> tuple[str, int]:
    """Where layer ``layer`` of a stack lives: the attribute path of its stacked block inside
    the :class:`LayerStack` and the index along that block's leading axis, e.g.
    ``("blocks.1", 3)`` for layer 7 with period 2, or ``("tail.0", 0)`` for the first layer
    after the last whole period."""
    whole = n_layers - n_layers % period
    if layer < whole:
        return f"blocks.{layer % period}", layer // period
    return f"tail.{layer - whole}", 0


def _index(tree: _T, i: int) -> _T:
    return jax.tree_util.tree_map(lambda a: a[i] if eqx.is_array(a) else a, tree)


def scan_by_default() -> bool:
    """Whether a stack with ``scan=None`` scans: on accelerators yes, on CPU no.

    The platform is the target's (the active mesh's, see ``zoo_attention.find_target``), so a
    TPU step compiled from a CPU host scans.
    """
    return zoo_attention.find_target().platform != "cpu"


def _unstack(tree: _T, n: int) -> list[_T]:
    """``n`` trees holding the slices ``[i]`` of every leaf of ``tree``.

    One ``lax.split`` per leaf: its transpose is a single concatenate, where indexing each
    slice would give every layer a zero-padded full-size gradient to sum.
    """
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    parts = [[p.reshape(p.shape[1:]) for p in jax.lax.split(a, [1] * n)] for a in leaves]
    return [jax.tree_util.tree_unflatten(treedef, [p[i] for p in parts]) for i in range(n)]


class LayerStack(eqx.Module):
    """Blocks with stacked parameters, applied in order (scanned or unrolled).

    Attributes:
        blocks: ``period`` blocks whose array leaves carry a leading axis of ``n_layers // period``.
        n_layers: number of layers.
        period: layers per scan step (1 unless layers alternate static configuration).
        tail: the last ``n_layers % period`` layers (phases ``0, 1, ...``), each with a leading
            axis of one, applied unrolled after the scanned groups; empty when ``period``
            divides ``n_layers``.
        remat: rematerialise each group of ``period`` layers in the backward pass
            (``jax.checkpoint``).
        scan: ``True`` applies the groups with ``jax.lax.scan``, ``False`` with an unrolled
            loop, ``None`` picks by backend (:func:`scan_by_default`).
    """

    blocks: tuple[TransformerBlock, ...]
    n_layers: int = eqx.field(static=True)
    period: int = eqx.field(static=True)
    remat: bool = eqx.field(static=True)
    scan: bool | None = eqx.field(static=True, default=None)
    tail: tuple[TransformerBlock, ...] = ()

    def __check_init__(self) -> None:
        _check_depth(self.n_layers, self.period)
        if len(self.blocks) != self.period:
            raise ValueError(f"expected {self.period} stacked blocks, got {len(self.blocks)}.")
        if len(self.tail) != self.n_layers % self.period:
            raise ValueError(
                f"expected {self.n_layers % self.period} tail blocks, got {len(self.tail)}."
            )

    @property
    def groups(self) -> int:
        """Scanned groups of ``period`` layers (the tail comes after them)."""
        return self.n_layers // self.period

    @classmethod
    def init(
        cls,
        make_block: Callable[[int, PRNGKeyArray], TransformerBlock],
        n_layers: int,
        *,
        period: int = 1,
        remat: bool = False,
        scan: bool | None = None,
        key: PRNGKeyArray,
    ) -> LayerStack:
        """Build with ``make_block(phase, key)`` for ``phase in range(period)``.

        ``make_block`` sets the static configuration of every layer ``l`` with
        ``l % period == phase``; it is vmapped over one key per layer, so each layer gets its
        own initialisation. ``n_layers`` need not be a multiple of ``period`` (see ``tail``).
        """
        _check_depth(n_layers, period)
        keys, tail_keys = _split(key, n_layers, period)

        def make(p: int, k: Array) -> TransformerBlock:
            # One compiled init program per phase instead of op-by-op dispatch under vmap.
            return eqx.filter_jit(eqx.filter_vmap(lambda k: make_block(p, k)))(k)

        blocks = tuple(make(p, keys[:, p]) for p in range(period))
        tail = tuple(make(p, tail_keys[:, p]) for p in range(n_layers % period))
        return cls(blocks, n_layers, period, remat, scan, tail)

    @classmethod
    def from_layers(
        cls,
        layers: Sequence[TransformerBlock],
        *,
        period: int = 1,
        remat: bool = False,
        scan: bool | None = None,
    ) -> LayerStack:
        """Stack per-layer blocks (layer ``l`` has the static configuration of phase ``l % period``)."""
        n = len(layers)
        if period <= 0 or n < period:
            raise ValueError(f"got {n} layers, fewer than `period` {period}.")
        whole = n - n % period

        def stack(group: Sequence[TransformerBlock]) -> TransformerBlock:
            return jax.tree_util.tree_map(
                lambda *xs: jnp.stack(xs) if eqx.is_array(xs[0]) else xs[0], *group
            )

        blocks = tuple(stack(layers[p:whole:period]) for p in range(period))
        tail = tuple(stack([layer]) for layer in layers[whole:])
        return cls(blocks, n, period, remat, scan, tail)

    def logical_axes(self) -> LayerStack:
        """This stack with every array replaced by its logical names, ``"layers"`` first."""
        names = stacked_axes(logical_axes(self.blocks), self.blocks)
        named = eqx.tree_at(lambda s: s.blocks, self, names)
        if not self.tail:
            return named
        tail = stacked_axes(logical_axes(self.tail), self.tail)
        return eqx.tree_at(lambda s: s.tail, named, tail)

    def layer(self, i: int) -> TransformerBlock:
        """Layer ``i`` as a plain (unstacked) block."""
        if not 0 <= i < self.n_layers:
            raise ValueError(f"layer index {i} is out of range for {self.n_layers} layers.")
        path, index = layer_slot(i, self.n_layers, self.period)
        kind, phase = path.split(".")
        block: TransformerBlock = getattr(self, kind)[int(phase)]
        return _index(block, index)

    def layers(self) -> list[TransformerBlock]:
        """Every layer as a plain block, in order."""
        return [self.layer(i) for i in range(self.n_layers)]

    @property
    def scans(self) -> bool:
        """Whether the groups run under ``jax.lax.scan`` (else an unrolled loop)."""
        return scan_by_default() if self.scan is None else self.scan

    def _apply(
        self,
        body: Callable[[tuple[TransformerBlock, ...], _C, _X], tuple[_C, _Y]],
        carry: _C,
        xs: _X,
        blocks: tuple[TransformerBlock, ...] | None = None,
    ) -> tuple[_C, _Y]:
        """``lax.scan(body)`` over the groups, scanned or unrolled; ``xs`` leaves are per group.

        ``blocks`` (default: the scanned groups) may be the tail, one group applied unrolled.
        """
        tail = blocks is not None
        dynamic, static = eqx.partition(self.blocks if blocks is None else blocks, eqx.is_array)
        groups = 1 if tail else self.groups

        # ``params``: the blocks holding only their arrays (``None`` elsewhere), still blocks.
        def step(c: _C, inputs: tuple[tuple[TransformerBlock, ...], _X]) -> tuple[_C, _Y]:
            params, x_in = inputs
            return body(eqx.combine(params, static), c, x_in)

        if self.remat:
            step = jax.checkpoint(step)
        if self.scans and not tail:
            return jax.lax.scan(step, carry, (dynamic, xs), length=groups)
        ys: list[_Y] = []
        for g, params in enumerate(_unstack(dynamic, groups)):
            x_in = jax.tree_util.tree_map(lambda a, g=g: a[g], xs)
            carry, y = step(carry, (params, x_in))
            ys.append(y)
        return carry, jax.tree_util.tree_map(lambda *a: jnp.stack(a), *ys)

    def __call__(
        self,
        x: Float[Array, "B T D"],
        positions: Int[Array, "B T"],
        segment_ids: Int[Array, "B T"] | None = None,
        *,
        key: PRNGKeyArray | None = None,
    ) -> Float[Array, "B T D"]:
        """Apply every layer in order; ``key`` (optional) turns dropout on."""
        return self.apply(x, positions, segment_ids, key=key)[0]

    def apply(
        self,
        x: Float[Array, "B T D"],
        positions: Int[Array, "B T"],
        segment_ids: Int[Array, "B T"] | None = None,
        *,
        key: PRNGKeyArray | None = None,
        mask: Array | None = None,
        keep_logits: bool = False,
    ) -> tuple[Float[Array, "B T D"], RouterStats | None]:
        """Every layer in order, and the router statistics of its mixture-of-experts layers
        stacked in layer order (``[L_moe, ...]``; ``None`` without such layers), over the
        tokens ``mask`` keeps (``None``: all; ``keep_logits``: with the router logits)."""
        keys, tail_keys = (None, None) if key is None else _split(key, self.n_layers, self.period)

        def body(
            blocks: tuple[TransformerBlock, ...], h: Array, k: Array | None
        ) -> tuple[Array, tuple[RouterStats | None, ...]]:
            stats = []
            for p, block in enumerate(blocks):
                # The residual stream is laid out by the batch and sequence rules at every block
                # (a no-op without active axis rules); without it XLA may pick layouts that
                # move data.
                h = logical_constraint(h, (BATCH, SEQUENCE, None))
                h, s = block.apply(
                    h,
                    positions,
                    segment_ids,
                    key=None if k is None else k[p],
                    mask=mask,
                    keep_logits=keep_logits,
                )
                stats.append(s)
            return h, tuple(stats)

        with jax.named_scope("layers"):
            out, ys = self._apply(body, x, keys)
            tail_ys: tuple[RouterStats | None, ...] = ()
            if self.tail:
                out, tail_ys = self._apply(body, out, tail_keys, self.tail)
        whole = self.groups * self.period
        per_layer = []
        for layer in range(self.n_layers):
            found, index = (
                (ys[layer % self.period], layer // self.period)
                if layer < whole
                else (tail_ys[layer - whole], 0)
            )
            if found is not None:
                per_layer.append(jax.tree_util.tree_map(lambda a, i=index: a[i], found))
        if not per_layer:
            return out, None
        return out, jax.tree_util.tree_map(lambda *a: jnp.stack(a), *per_layer)

    def decode(
        self,
        x: Float[Array, "B t D"],
        positions: Int[Array, "B t"],
        cache_key: Float[Array, "L B S K H"],
        cache_value: Float[Array, "L B S K H"],
        slot_positions: Int[Array, "B S"],
        slot_valid: Bool[Array, "B S"],
        start: Int[Array, ""],
    ) -> tuple[Float[Array, "B t D"], Float[Array, "L B t K H"], Float[Array, "L B t K H"]]:
        """Every layer for ``t`` new tokens against a cache; returns the new keys and values."""
        out, k, v, _ = self.decode_states(
            x, positions, cache_key, cache_value, slot_positions, slot_valid, start
        )
        return out, k, v

    def decode_states(
        self,
        x: Float[Array, "B t D"],
        positions: Int[Array, "B t"],
        cache_key: Float[Array, "La B S K H"],
        cache_value: Float[Array, "La B S K H"],
        slot_positions: Int[Array, "B S"],
        slot_valid: Bool[Array, "B S"],
        start: Int[Array, ""],
        linear: tuple[Array, Array] | None = None,
        mask: Bool[Array, "B t"] | None = None,
    ) -> tuple[
        Float[Array, "B t D"],
        Float[Array, "La B t K H"],
        Float[Array, "La B t K H"],
        tuple[Array, Array] | None,
    ]:
        """Every layer for ``t`` new tokens: attention layers against the cache (``cache_key``
        and ``cache_value`` hold the attention layers only, in order), gated DeltaNet layers
        from ``linear``, their ``(conv [Ll, B, W - 1, C], recurrent [Ll, B, N, Dk, Dv])``
        states in order (``mask``: ``False`` at padding). Returns the output, the attention
        layers' new keys and values, and the DeltaNet layers' new states (``None`` without such
        layers)."""
        kinds = [b.is_linear for b in self.blocks]
        tail_kinds = [b.is_linear for b in self.tail]
        whole = self.groups

        def grouped(a: Array | None, linear_kind: bool) -> tuple[Any, Any]:
            """``a`` (one entry per layer of the kind) as ``[groups, per group]`` for the scan
            and ``[1, tail count]`` for the tail."""
            per = kinds.count(linear_kind)
            tail = tail_kinds.count(linear_kind)
            if a is None or per + tail == 0:
                return None, None
            main = a[: whole * per].reshape(whole, per, *a.shape[1:]) if per else None
            rest = a[whole * per :].reshape(1, tail, *a.shape[1:]) if tail else None
            return main, rest

        def body(blocks: tuple[TransformerBlock, ...], h: Array, xs: Any) -> tuple[Array, Any]:
            keys, values, convs, states = xs
            new: dict[str, list[Array]] = {"k": [], "v": [], "conv": [], "state": []}
            for block in blocks:
                if block.is_linear:
                    i = len(new["conv"])
                    h, c, s = block.decode_linear(h, convs[i], states[i], mask)
                    new["conv"].append(c)
                    new["state"].append(s)
                else:
                    i = len(new["k"])
                    h, k, v = block.decode(
                        h, positions, keys[i], values[i], slot_positions, slot_valid, start
                    )
                    new["k"].append(k)
                    new["v"].append(v)
            return h, tuple(jnp.stack(a) if a else None for a in new.values())

        conv, state = (None, None) if linear is None else linear
        parts = [grouped(a, kind) for a, kind in
                 ((cache_key, False), (cache_value, False), (conv, True), (state, True))]  # fmt: skip
        out, ys = self._apply(body, x, tuple(p[0] for p in parts))
        flat = [None if y is None else y.reshape(-1, *y.shape[2:]) for y in ys]
        if self.tail:
            out, tail_ys = self._apply(body, out, tuple(p[1] for p in parts), self.tail)
            flat = [
                a if b is None else b.reshape(-1, *b.shape[2:]) if a is None
                else jnp.concatenate([a, b.reshape(-1, *b.shape[2:])])
                for a, b in zip(flat, tail_ys, strict=True)
            ]  # fmt: skip
        k_new, v_new, conv_new, state_new = flat
        if k_new is None or v_new is None:  # a stack of DeltaNet layers alone
            shape = (0, x.shape[0], x.shape[1], *cache_key.shape[3:])
            k_new = v_new = jnp.zeros(shape, cache_key.dtype)
        if conv_new is None or state_new is None:
            return out, k_new, v_new, None
        return out, k_new, v_new, (conv_new, state_new)
