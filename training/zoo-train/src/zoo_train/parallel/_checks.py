"""Settings a mesh cannot serve, caught before any tracing, each as one sentence."""

from __future__ import annotations

import math
from collections.abc import Mapping

from jax.sharding import Mesh

from ._rules import MeshAxes, rule_axes


def check_batch(batch_size: int, mesh: Mesh, rules: Mapping[str, MeshAxes]) -> None:
    """The batch's rows must split evenly over the data-parallel mesh axes.

    Raises:
        ValueError: naming the batch size and the axes.
    """
    axes = rule_axes(rules, "batch")
    shards = math.prod(mesh.shape.get(a, 1) for a in axes)
    if batch_size % shards:
        sizes = " x ".join(f"{a}={mesh.shape.get(a, 1)}" for a in axes)
        raise ValueError(
            f"--batch-size {batch_size} cannot be split over the {shards} data-parallel shards "
            f"of the mesh ({sizes}); use a multiple of {shards}."
        )


def check_heads(
    num_heads: int, num_kv_heads: int, mesh: Mesh, rules: Mapping[str, MeshAxes]
) -> None:
    """The tensor-parallel axes must divide the key/value heads (so query heads follow).

    Raises:
        ValueError: naming the head counts and the axis size.
    """
    axes = tuple(dict.fromkeys(rule_axes(rules, "heads") + rule_axes(rules, "kv_heads")))
    shards = math.prod(mesh.shape.get(a, 1) for a in axes)
    if shards == 1:
        return
    names = " x ".join(f"{a}={mesh.shape.get(a, 1)}" for a in axes)
    if num_kv_heads % shards or num_heads % shards:
        raise ValueError(
            f"tensor parallelism over {shards} devices ({names}) needs the heads split evenly, "
            f"but the model has {num_kv_heads} key/value heads and {num_heads} query heads; use "
            f"a tensor size that divides {num_kv_heads}."
        )


def check_experts(n_experts: int, mesh: Mesh, rules: Mapping[str, MeshAxes]) -> None:
    """The expert-parallel axes must divide the experts of each mixture-of-experts layer.

    Raises:
        ValueError: naming the expert count and the axis sizes.
    """
    axes = rule_axes(rules, "experts")
    shards = math.prod(mesh.shape.get(a, 1) for a in axes)
    if n_experts and shards > 1 and n_experts % shards:
        names = " x ".join(f"{a}={mesh.shape.get(a, 1)}" for a in axes)
        raise ValueError(
            f"expert parallelism over {shards} devices ({names}) needs the experts split evenly, "
            f"but the model has {n_experts} experts a layer; use an expert size that divides "
            f"{n_experts}."
        )


def check_sequence(seq_len: int, mesh: Mesh, rules: Mapping[str, MeshAxes]) -> None:
    """The context-parallel axes must split each sequence into twice as many equal chunks (the
    causal load balancing gives each device two).

    Raises:
        ValueError: naming the sequence length and the axis sizes.
    """
    axes = rule_axes(rules, "sequence")
    shards = math.prod(mesh.shape.get(a, 1) for a in axes)
    if shards > 1 and seq_len % (2 * shards):
        names = " x ".join(f"{a}={mesh.shape.get(a, 1)}" for a in axes)
        raise ValueError(
            f"--seq-len {seq_len} cannot be split over the {shards} context-parallel shards of "
            f"the mesh ({names}) in two chunks each; use a multiple of {2 * shards}."
        )


def check_recurrent(n_linear_layers: int, mesh: Mesh, rules: Mapping[str, MeshAxes]) -> None:
    """A model with gated DeltaNet layers cannot have its sequences split: each such layer
    carries a recurrent state from the first token to the last.

    Raises:
        ValueError: naming the layers and the context axes.
    """
    axes = rule_axes(rules, "sequence")
    shards = math.prod(mesh.shape.get(a, 1) for a in axes)
    if n_linear_layers and shards > 1:
        names = " x ".join(f"{a}={mesh.shape.get(a, 1)}" for a in axes)
        raise ValueError(
            f"the context axes ({names}) split each sequence, but the model's {n_linear_layers} "
            "gated DeltaNet layers carry a recurrent state along the whole sequence; use "
            "context=1 and the fsdp or tensor axes instead."
        )
