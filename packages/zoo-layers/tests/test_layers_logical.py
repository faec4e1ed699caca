"""Logical axis names: every weight dimension named by its layer, names mapped to a mesh by a
table, and activation constraints that do nothing until rules are active."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

import zoo_attention
import zoo_layers as zl

D, N, K, F = 32, 4, 2, 64


def _block(phase: int, key: jax.Array) -> zl.TransformerBlock:
    k1, k2 = jax.random.split(key)
    return zl.TransformerBlock(
        attn_norm=zl.RMSNorm(D),
        attn=zl.Attention(D, N, num_kv_heads=K, qkv_bias=True, qk_norm=True, key=k1),
        mlp_norm=zl.RMSNorm(D),
        mlp=zl.MLP(D, F, activation="silu", gated=True, key=k2),
    )


@pytest.fixture(scope="module")
def stack() -> zl.LayerStack:
    return zl.LayerStack.init(_block, 3, key=jax.random.key(0))


def _named(tree):
    return zl.logical_axes(tree)


def test_each_weight_names_its_dimensions(stack):
    names = _named(stack).blocks[0]
    attn, mlp = names.attn, names.mlp
    assert attn.q_proj.weight.names == ("layers", "heads", "embed")
    assert attn.q_proj.bias.names == ("layers", "heads")
    assert attn.k_proj.weight.names == ("layers", "kv_heads", "embed")
    assert attn.v_proj.weight.names == ("layers", "kv_heads", "embed")
    assert attn.o_proj.weight.names == ("layers", "embed", "heads")
    assert attn.q_norm.weight.names == ("layers", "head_dim")
    assert mlp.gate.weight.names == mlp.up.weight.names == ("layers", "mlp", "embed")
    assert mlp.down.weight.names == ("layers", "embed", "mlp")
    assert names.attn_norm.weight.names == ("layers", "norm")
    table = zl.logical_axes(zl.Embedding(100, D, key=jax.random.key(1)))
    assert table.weight.names == ("vocab", "embed")


def test_every_array_gets_one_name_per_dimension_also_when_abstract(stack):
    abstract = eqx.filter_eval_shape(lambda: stack)
    for tree in (stack, abstract):
        arrays = jax.tree.leaves(eqx.filter(tree, lambda x: hasattr(x, "shape")))
        names = jax.tree.leaves(
            zl.logical_axes(tree), is_leaf=lambda x: isinstance(x, zl.LogicalAxes)
        )
        assert len(arrays) == len(names) > 0
        assert [len(n) for n in names] == [a.ndim for a in arrays]


def test_unannotated_arrays_are_unnamed():
    tree = {"w": jnp.ones((3, 4)), "b": jnp.ones(4)}
    names = zl.logical_axes(tree)
    assert names["w"] == zl.LogicalAxes((None, None))
    assert names["w"].is_unnamed


RULES = {"batch": ("data", "fsdp"), "embed": "fsdp", "heads": "tensor", "mlp": "tensor"}
SIZES = {"data": 2, "fsdp": 4, "tensor": 2}


@pytest.mark.parametrize(
    ("names", "shape", "want"),
    [
        (("heads", "embed"), (64, 32), P("tensor", "fsdp")),
        (("embed", "heads"), (32, 64), P("fsdp", "tensor")),
        (("layers", "mlp", "embed"), (3, 64, 32), P(None, "tensor", "fsdp")),
        (("batch", None, None), (16, 8, 32), P(("data", "fsdp"))),
        (("batch",), (6, 8), P("data")),  # 6 rows: fsdp (x4) would not divide, dropped
        (("embed", "embed"), (32, 32), P("fsdp")),  # a mesh axis is used once
        (("heads", "embed"), (3, 30), P()),  # nothing divides: replicated
        (("norm",), (32,), P()),  # no rule: replicated
    ],
)
def test_logical_names_to_partition_specs(names, shape, want):
    assert zl.logical_to_spec(names, shape, RULES, SIZES) == want


def test_size_one_mesh_axes_are_left_out():
    assert zl.logical_to_spec(("heads", "embed"), (64, 32), RULES, {"fsdp": 1, "tensor": 2}) == P(
        "tensor"
    )


def test_constraints_do_nothing_without_rules_and_rules_name_the_attention_axes():
    x = jnp.ones((4, 8, D))
    jaxpr = str(jax.make_jaxpr(lambda y: zl.logical_constraint(y, ("batch",)))(x))
    assert "sharding_constraint" not in jaxpr
    assert zl.current_rules() is None
    with zl.axis_rules(RULES):
        assert zl.current_rules()["embed"] == "fsdp"
        axes = zoo_attention.current_partition_axes()
        assert axes.batch == ("data", "fsdp") and axes.heads == ("tensor",)
    assert zl.current_rules() is None
    assert zoo_attention.current_partition_axes().batch is None


def test_constraints_under_a_one_device_mesh_leave_the_program_alone():
    mesh = jax.make_mesh((1,), ("data",), axis_types=(AxisType.Auto,))
    x = jnp.ones((4, 8, D))
    with jax.set_mesh(mesh), zl.axis_rules({"batch": "data"}):
        jaxpr = str(jax.make_jaxpr(lambda y: zl.logical_constraint(y, ("batch",)))(x))
    assert "sharding_constraint" not in jaxpr
