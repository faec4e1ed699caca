"""Running one linear-attention case against a kernel and listing what disagrees with the
float64 reference."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...testing import compare, fresh_seed
from .._api import gated_delta_rule, scope_name
from .._registry import get_kernel
from ._cases import TOLERANCES, LinearCase, draw_segment_ids
from ._reference import reference_gated_delta_rule

#: The differentiable inputs, in the contract's order, as the reference names their gradients.
INPUTS = ("query", "key", "value", "log_decay", "beta", "initial_state")


@dataclasses.dataclass
class LinearInputs:
    """Arrays for one case: the differentiable inputs by name (``initial_state`` only when the
    case has one), the segment ids, and cotangents of the output and the final state."""

    arrays: dict[str, jax.Array]
    segment_ids: jax.Array | None
    d_out: jax.Array
    d_state: jax.Array
    seed: int


def make_inputs(case: LinearCase, seed: int) -> LinearInputs:
    """Random inputs for ``case`` by the rules of :mod:`._cases`."""
    rng = np.random.default_rng(seed)
    b, t, n, h = case.batch, case.seq_len, case.num_heads, case.num_qk_heads
    dk, dv, dtype = case.key_dim, case.value_dim, jnp.dtype(case.dtype)

    def normal(*shape: int, std: float = 1.0) -> np.ndarray:
        return std * rng.standard_normal(shape)

    def device(x: np.ndarray, to: Any) -> jax.Array:
        # Cast on the host (float64, float32, then the case's dtype) and copied: no device
        # program per conversion.
        return jax.device_put(np.asarray(x).astype(np.float32).astype(to))

    # Unnormalised keys of norm about 1 keep |1 - beta |k|^2| <= 1: the state stays bounded.
    key_std = 1.0 if case.normalize_qk else dk**-0.5
    arrays = {
        "query": device(normal(b, t, h, dk), dtype),
        "key": device(normal(b, t, h, dk, std=key_std), dtype),
        "value": device(normal(b, t, n, dv), dtype),
        # Decays from about 0.999 to 0.01 a token: log decays in (-5, 0), most near -0.2.
        "log_decay": device(-np.exp(normal(b, t, n, std=0.8) - 1.5), np.float32),
        "beta": device(1.0 / (1.0 + np.exp(-normal(b, t, n))), dtype),
    }
    if case.initial_state:
        arrays["initial_state"] = device(normal(b, n, dk, dv, std=0.5), np.float32)
    ids = draw_segment_ids(case, rng)
    return LinearInputs(
        arrays=arrays,
        segment_ids=None if ids is None else jax.device_put(np.asarray(ids)),
        d_out=device(normal(b, t, n, dv), dtype),
        d_state=device(normal(b, n, dk, dv), np.float32),
        seed=seed,
    )


def _f64(x: jax.Array) -> np.ndarray:
    """``x`` on the host in float64 (exact from bfloat16 and float32; no device program)."""
    return np.asarray(x).astype(np.float64)


def call_case(
    implementation: str, case: LinearCase, x: LinearInputs
) -> tuple[tuple[jax.Array, jax.Array], dict[str, jax.Array]]:
    """``((out, final_state), gradients by name)`` of ``implementation`` on inputs ``x``."""
    names = tuple(x.arrays)

    @jax.jit
    def outputs_and_gradients(
        arrays: tuple[jax.Array, ...], ids: jax.Array | None, cotangents: tuple[jax.Array, ...]
    ) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, ...]]:
        # One program for the outputs and their gradients: one compile per case.
        def run(*arrays: jax.Array) -> tuple[jax.Array, jax.Array]:
            kw: dict[str, Any] = dict(zip(names, arrays, strict=True))
            return gated_delta_rule(
                kw.pop("query"),
                kw.pop("key"),
                kw.pop("value"),
                kw.pop("log_decay"),
                kw.pop("beta"),
                scale=case.scale,
                normalize_qk=case.normalize_qk,
                segment_ids=ids,
                implementation=implementation,
                **kw,
            )

        outputs, vjp = jax.vjp(run, *arrays)
        return outputs, vjp(cotangents)

    outputs, grads = outputs_and_gradients(
        tuple(x.arrays.values()), x.segment_ids, (x.d_out, x.d_state)
    )
    return outputs, dict(zip(names, grads, strict=True))


def run_case(implementation: str, case: LinearCase, seed: int | None = None) -> list[str]:
    """Check the output, the final state and the gradients w.r.t. every input of
    ``implementation`` on ``case``; return the failures (empty: it conforms). Each names the
    seed, so ``ZOO_TEST_SEED=<seed>`` replays it."""
    seed = fresh_seed() if seed is None else seed
    x = make_inputs(case, seed)
    tol = TOLERANCES[case.dtype]
    (out, state), grads = call_case(implementation, case, x)
    a = {name: _f64(v) for name, v in x.arrays.items()}
    ref = reference_gated_delta_rule(
        a["query"],
        a["key"],
        a["value"],
        a["log_decay"],
        a["beta"],
        scale=case.scale,
        normalize_qk=case.normalize_qk,
        segment_ids=None if x.segment_ids is None else np.asarray(x.segment_ids),
        initial_state=a.get("initial_state"),
        d_out=_f64(x.d_out),
        d_state=_f64(x.d_state),
    )
    assert ref.grads is not None  # cotangents were given
    failures = []
    if out.dtype != x.arrays["value"].dtype:
        failures.append(f"out dtype {out.dtype}, expected {x.arrays['value'].dtype}")
    if state.dtype != jnp.float32:
        failures.append(f"final state dtype {state.dtype}, expected float32")
    for name, grad in grads.items():
        if grad.dtype != x.arrays[name].dtype:
            failures.append(f"d{name} dtype {grad.dtype}, expected {x.arrays[name].dtype}")
    checks = [
        ("out", out, ref.out, tol["out"]),
        ("final_state", state, ref.final_state, tol["out"]),
    ]
    checks += [(f"d{name}", grads[name], ref.grads[name], tol["grad"]) for name in grads]
    for label, got, want, t in checks:
        problem = compare(label, got, want, t)
        if problem:
            failures.append(problem)
    return [f"[{case.name} seed={seed}] {f}" for f in failures]


def named_scope_failures(implementation: str, seed: int | None = None) -> list[str]:
    """Check that a jitted call carries the kernel's named scope in its HLO metadata."""
    kernel = get_kernel(implementation)
    rng = np.random.default_rng(fresh_seed() if seed is None else seed)
    q = jnp.asarray(rng.standard_normal((1, 16, 2, 32)), jnp.float32)
    g = jnp.asarray(-rng.random((1, 16, 2)), jnp.float32)
    fn = jax.jit(lambda q: gated_delta_rule(q, q, q, g, -g, implementation=implementation)[0])
    text = fn.lower(q).as_text(debug_info=True)
    want = scope_name(kernel.name, kernel.version)
    return [] if want in text else [f"named scope {want!r} not found in the lowered HLO"]
