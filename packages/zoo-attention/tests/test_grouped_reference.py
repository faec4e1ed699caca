"""The hand-written float64 grouped-matmul reference agrees with plain autodiff of a masked
float64 einsum, and the suite's group sizes hold their rule on every draw."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_attention.grouped.testing import CASES, draw_group_sizes, reference_grouped_matmul


@pytest.mark.parametrize("case", CASES, ids=str)
def test_reference_gradients_match_autodiff_of_a_masked_einsum(case):
    rng = np.random.default_rng()
    lhs, cot = rng.standard_normal((case.m, case.k)), rng.standard_normal((case.m, case.n))
    rhs = rng.standard_normal((case.groups, case.k, case.n))
    sizes = draw_group_sizes(case, rng)
    group = np.repeat(np.arange(case.groups + 1), (*sizes, case.m - sizes.sum()))
    onehot = np.asarray(group[:, None] == np.arange(case.groups), np.float64)
    with jax.enable_x64(True):
        f = lambda a, b: jnp.einsum("mg,mk,gkn->mn", jnp.asarray(onehot, jnp.float64), a, b)
        out, vjp = jax.vjp(f, *(jnp.asarray(x, jnp.float64) for x in (lhs, rhs)))
        dlhs, drhs = vjp(jnp.asarray(cot, jnp.float64))
    ref = reference_grouped_matmul(lhs, rhs, sizes, cot)
    for got, want in ((ref.out, out), (ref.dlhs, dlhs), (ref.drhs, drhs)):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_draw_of_group_sizes_holds_its_rule(case):
    rng = np.random.default_rng()
    for _ in range(200):
        sizes = draw_group_sizes(case, rng)
        assert sizes.dtype == np.int32 and sizes.shape == (case.groups,) and sizes.min() >= 0
        used = int(sizes.sum())
        if case.sizes == "none":
            assert used == 0
        elif case.sizes == "full":
            assert used == case.m
        else:
            assert 0 < used < case.m  # rows past the groups
        if case.groups > 1:
            assert (sizes == 0).any()  # a group with no rows


def test_a_case_of_one_group_has_no_empty_group_but_rows_past_it():
    (case,) = [c for c in CASES if c.groups == 1]
    sizes = draw_group_sizes(dataclasses.replace(case), np.random.default_rng())
    assert 0 < sizes[0] < case.m
