"""Running one grouped-matmul case against a kernel and listing what disagrees with the
reference."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ...testing import compare, fresh_seed
from .._api import grouped_matmul, scope_name
from .._registry import get_kernel
from ._cases import TOLERANCES, GroupedCase, draw_group_sizes
from ._reference import reference_grouped_matmul


@dataclasses.dataclass
class GroupedInputs:
    """Arrays for one case: ``lhs``, ``rhs`` (in their dtypes), the group sizes and a
    cotangent of the output."""

    lhs: jax.Array
    rhs: jax.Array
    group_sizes: jax.Array
    cotangent: jax.Array
    seed: int


def make_inputs(case: GroupedCase, seed: int) -> GroupedInputs:
    """Random normal inputs for ``case`` and group sizes drawn by its rule."""
    rng = np.random.default_rng(seed)

    def normal(dtype: str, *shape: int) -> jax.Array:
        return jnp.asarray(rng.standard_normal(shape), jnp.dtype(dtype))

    return GroupedInputs(
        lhs=normal(case.dtype, case.m, case.k),
        rhs=normal(case.rhs_dtype or case.dtype, case.groups, case.k, case.n),
        group_sizes=jnp.asarray(draw_group_sizes(case, rng)),
        cotangent=normal(case.dtype, case.m, case.n),
        seed=seed,
    )


def _f64(x: jax.Array) -> np.ndarray:
    return np.asarray(x.astype(jnp.float32), np.float64)


def _past_rows_failures(out: jax.Array, dlhs: jax.Array, used: int) -> list[str]:
    failures = []
    for label, x in (("out", out), ("dlhs", dlhs)):
        past = _f64(x)[used:]
        if past.size and np.any(past != 0):
            failures.append(
                f"{label}: rows past sum(group_sizes)={used} are not zero "
                f"(max {np.abs(past).max():.3g})"
            )
    return failures


def run_case(implementation: str, case: GroupedCase, seed: int | None = None) -> list[str]:
    """Check the output and the gradients w.r.t. ``lhs`` and ``rhs`` of ``implementation`` on
    ``case``; return the failures (empty: it conforms). Each names the seed, so
    ``ZOO_TEST_SEED=<seed>`` replays it."""
    seed = fresh_seed() if seed is None else seed
    x = make_inputs(case, seed)
    tol = TOLERANCES[case.dtype]
    call = jax.jit(lambda a, b, s: grouped_matmul(a, b, s, implementation=implementation))
    out, vjp = jax.vjp(lambda a, b: call(a, b, x.group_sizes), x.lhs, x.rhs)
    dlhs, drhs = vjp(x.cotangent)
    # The reference multiplies what the contract does: rhs cast to lhs's dtype.
    ref = reference_grouped_matmul(
        _f64(x.lhs), _f64(x.rhs.astype(x.lhs.dtype)), np.asarray(x.group_sizes), _f64(x.cotangent)
    )
    assert ref.dlhs is not None and ref.drhs is not None  # a cotangent was given
    failures = []
    for label, got, want in (("out", out, x.lhs), ("dlhs", dlhs, x.lhs), ("drhs", drhs, x.rhs)):
        if got.dtype != want.dtype:
            failures.append(f"{label} dtype {got.dtype}, expected {want.dtype}")
    for label, got, expect, t in (
        ("out", out, ref.out, tol["out"]),
        ("dlhs", dlhs, ref.dlhs, tol["grad"]),
        ("drhs", drhs, ref.drhs, tol["grad"]),
    ):
        problem = compare(label, got, expect, t)
        if problem:
            failures.append(problem)
    failures += _past_rows_failures(out, dlhs, int(np.sum(np.asarray(x.group_sizes))))
    sizes = ",".join(str(int(s)) for s in np.asarray(x.group_sizes))
    return [f"[{case.name} seed={seed} sizes={sizes}] {f}" for f in failures]


def named_scope_failures(implementation: str, seed: int | None = None) -> list[str]:
    """Check that a jitted call carries the kernel's named scope in its HLO metadata."""
    kernel = get_kernel(implementation)
    rng = np.random.default_rng(fresh_seed() if seed is None else seed)
    lhs = jnp.asarray(rng.standard_normal((32, 16)), jnp.float32)
    rhs = jnp.asarray(rng.standard_normal((2, 16, 24)), jnp.float32)
    sizes = jnp.asarray([10, 20], jnp.int32)
    fn = jax.jit(lambda a: grouped_matmul(a, rhs, sizes, implementation=implementation))
    text = fn.lower(lhs).as_text(debug_info=True)
    want = scope_name(kernel.name, kernel.version)
    return [] if want in text else [f"named scope {want!r} not found in the lowered HLO"]
