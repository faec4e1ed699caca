"""zoo-attention 1.1 on a mesh: the target comes from the mesh, and a kernel XLA cannot
partition runs under shard_map over the batch and head axes, seeing one shard's shapes."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import zoo_attention
from zoo_attention import AttentionKernel, AttentionSpec


class PerShardKernel(AttentionKernel):
    """A kernel declared unpartitionable: records the specs it is called with and computes
    with the reference math (so its output can be compared)."""

    name = "per_shard_test"
    partitionable = False

    def __init__(self) -> None:
        self.calls: list[AttentionSpec] = []

    def check(self, spec: AttentionSpec) -> str | None:
        return None

    def __call__(self, query, key, value, segment_ids, spec):  # type: ignore[no-untyped-def]
        self.calls.append(spec)
        return zoo_attention.get_kernel("xla")(query, key, value, segment_ids, spec)


@pytest.fixture
def kernel():
    k = PerShardKernel()
    zoo_attention.register_kernel(k, replace=True)
    yield k
    zoo_attention.unregister_kernel(k.name)


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((2, 2, 2), ("data", "fsdp", "tensor"), axis_types=(AxisType.Auto,) * 3)


def _inputs(b: int, t: int, n: int, k: int, h: int, seed: int | None = None):
    rng = np.random.default_rng(seed)
    q = jnp.asarray(rng.standard_normal((b, t, n, h)), jnp.float32)
    kv = [jnp.asarray(rng.standard_normal((b, t, k, h)), jnp.float32) for _ in range(2)]
    ids = jnp.asarray(np.sort(rng.integers(0, 3, (b, t)), axis=1), jnp.int32)
    return q, kv[0], kv[1], ids


def _attend(impl: str, **kw):
    def f(q, k, v, ids):
        return zoo_attention.dot_product_attention(
            q, k, v, is_causal=True, segment_ids=ids, implementation=impl, **kw
        )

    return f


def _loss_and_grads(fn):
    return jax.value_and_grad(lambda q, k, v, ids: jnp.sum(fn(q, k, v, ids) ** 2), (0, 1, 2))


@pytest.mark.parametrize(
    ("k_heads", "local_kv"),
    [(2, 1), (1, 1)],  # GQA: kv heads split with the query heads; MQA: the one kv head replicated
)
def test_unpartitionable_kernel_runs_per_shard_and_matches_reference(
    kernel, mesh, k_heads, local_kv
):
    q, k, v, ids = _inputs(4, 16, 4, k_heads, 8)
    want_loss, want_grads = jax.jit(_loss_and_grads(_attend("xla")))(q, k, v, ids)

    batch = NamedSharding(mesh, P(("data", "fsdp")))
    with jax.set_mesh(mesh), zoo_attention.partition_axes(batch=("data", "fsdp"), heads="tensor"):
        fn = jax.jit(_loss_and_grads(_attend(kernel.name)))
        args = [jax.device_put(x, batch) for x in (q, k, v, ids)]
        jaxpr = str(jax.make_jaxpr(fn)(*args))
        loss, grads = fn(*args)

    assert "shard_map" in jaxpr
    local = kernel.calls[-1]
    assert (local.batch, local.num_heads, local.num_kv_heads) == (1, 2, local_kv)
    assert (local.platform, local.device_kind) == ("cpu", "cpu")
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    for got, want in zip(grads, want_grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


class PerShardSinksKernel(PerShardKernel):
    """The same, written for contract 1.3: sinks and values of their own width."""

    name = "per_shard_sinks_test"
    separate_value_head_dim = True

    def __call__(self, query, key, value, segment_ids, spec, *, sinks=None):  # type: ignore[no-untyped-def]
        self.calls.append(spec)
        return zoo_attention.get_kernel("xla")(query, key, value, segment_ids, spec, sinks=sinks)


def test_sinks_split_over_the_head_axes_with_the_query_heads(mesh):
    """Contract 1.3 per shard: each shard's kernel call gets its own heads' sinks (and the
    values' own width), and the sinks' gradient is summed back into its full [N]."""
    kernel = zoo_attention.register_kernel(PerShardSinksKernel(), replace=True)
    try:
        q, k, _, ids = _inputs(4, 16, 4, 2, 8, seed=3)
        v = jnp.asarray(np.random.default_rng(4).standard_normal((4, 16, 2, 12)), jnp.float32)
        sinks = jnp.asarray([1.5, -2.0, 0.5, 3.0], jnp.float32)

        def loss(impl):
            def f(q, k, v, sinks):
                out = zoo_attention.dot_product_attention(
                    q, k, v, is_causal=True, segment_ids=ids, sinks=sinks, implementation=impl
                )
                return jnp.sum(out**2)

            return jax.value_and_grad(f, (0, 1, 2, 3))

        want_loss, want_grads = jax.jit(loss("xla"))(q, k, v, sinks)
        batch = NamedSharding(mesh, P(("data", "fsdp")))
        with (
            jax.set_mesh(mesh),
            zoo_attention.partition_axes(batch=("data", "fsdp"), heads="tensor"),
        ):
            args = [jax.device_put(x, batch) for x in (q, k, v)]
            got_loss, got_grads = jax.jit(loss(kernel.name))(*args, sinks)
        local = kernel.calls[-1]
        assert (local.num_heads, local.has_sinks, local.v_head_dim) == (2, True, 12)
        np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
        for got, want in zip(got_grads, want_grads, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    finally:
        zoo_attention.unregister_kernel(kernel.name)


def test_without_partition_axes_the_free_axes_go_to_batch_then_heads(kernel, mesh):
    # B=2: only `data` divides the batch; `fsdp` then splits the 4 heads (and 2 kv heads);
    # `tensor` (2 x 2 = 4 does not divide K=2) is left replicated.
    q, k, v, ids = _inputs(2, 16, 4, 2, 8)
    want = _attend("xla")(q, k, v, ids)
    with jax.set_mesh(mesh):
        got = jax.jit(_attend(kernel.name))(q, k, v, ids)
    local = kernel.calls[-1]
    assert (local.batch, local.num_heads, local.num_kv_heads) == (1, 2, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_partitionable_kernels_are_left_to_xla(mesh):
    q, k, v, ids = _inputs(4, 16, 4, 2, 8)
    with jax.set_mesh(mesh):
        jaxpr = str(jax.make_jaxpr(_attend("xla"))(q, k, v, ids))
    assert "shard_map" not in jaxpr


def test_a_single_device_mesh_calls_the_kernel_directly(kernel):
    one = jax.make_mesh((1,), ("data",), axis_types=(AxisType.Auto,), devices=jax.devices()[:1])
    q, k, v, ids = _inputs(2, 16, 4, 2, 8)
    with jax.set_mesh(one):
        jaxpr = str(jax.make_jaxpr(_attend(kernel.name))(q, k, v, ids))
    assert "shard_map" not in jaxpr
    assert kernel.calls[-1].batch == 2


def test_target_comes_from_the_mesh_then_the_inputs_then_the_default(mesh):
    seen = {}

    def probe(label):
        def f(x):
            seen[label] = zoo_attention.find_target(x)
            return x

        return f

    x = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("data")))
    probe("eager")(jnp.ones(3))
    jax.jit(probe("inputs"))(x)
    with jax.set_mesh(mesh):
        jax.jit(probe("mesh"))(jnp.ones(3))
    assert seen["eager"].source == "default"
    assert seen["inputs"].source == "inputs"
    assert seen["mesh"].source == "mesh"
    assert {t.platform for t in seen.values()} == {"cpu"}


def test_the_spec_records_the_target(mesh):
    q, k, v, _ = _inputs(2, 16, 4, 2, 8)
    with jax.set_mesh(mesh):
        spec, _ = zoo_attention.make_spec(q, k, v)
    assert dataclasses.asdict(spec)["device_kind"] == "cpu"
    assert spec.platform == "cpu"
