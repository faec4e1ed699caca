"""Running one conformance case against a kernel and listing what disagrees with the reference."""

from __future__ import annotations

import dataclasses
import os
import secrets
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._api import dot_product_attention, scope_name
from .._kernel import contract_reason
from .._registry import get_kernel
from .._spec import make_spec
from ._cases import TOLERANCES, ConformanceCase
from ._reference import reference_attention

SEED_VAR = "ZOO_TEST_SEED"


def fresh_seed() -> int:
    """A new random seed per run, or ``$ZOO_TEST_SEED`` to replay a failure."""
    env = os.environ.get(SEED_VAR)
    return int(env) if env else secrets.randbits(32)


@dataclasses.dataclass
class CaseInputs:
    """Arrays for one case, in the case's dtype, plus the contract keyword arguments."""

    query: jax.Array
    key: jax.Array
    value: jax.Array
    cotangent: jax.Array
    kwargs: dict[str, Any]
    seed: int
    sinks: jax.Array | None = None


def _segment_ids(case: ConformanceCase, rng: np.random.Generator) -> Any:
    def runs(length: int) -> np.ndarray:
        # Two to four contiguous documents per row, as packing produces.
        cuts = np.sort(
            rng.choice(np.arange(1, max(length, 2)), size=rng.integers(1, 4), replace=True)
        )
        return np.searchsorted(cuts, np.arange(length), side="right").astype(np.int32)

    b, t, s = case.batch, case.q_len, case.kv_len
    if case.segments == "shared":
        return jax.device_put(np.stack([runs(t) for _ in range(b)]))
    q_ids = np.stack([runs(t) for _ in range(b)])
    kv_ids = np.stack([runs(s) for _ in range(b)])
    if case.segments == "unmatched":
        # Ids 100+ exist only on the query side: those rows see no key at all.
        q_ids[:, : max(1, t // 3)] = 100 + np.arange(max(1, t // 3)) % 3
    return jax.device_put(q_ids), jax.device_put(kv_ids)


def make_inputs(case: ConformanceCase, seed: int) -> CaseInputs:
    """Random inputs for ``case`` (normal q/k/v, scaled so softmax is neither flat nor one-hot)."""
    rng = np.random.default_rng(seed)
    dtype = jnp.dtype(case.dtype)
    b, t, s, n, k, h = (
        case.batch,
        case.q_len,
        case.kv_len,
        case.num_heads,
        case.num_kv_heads,
        case.head_dim,
    )

    hv = h if case.value_head_dim is None else case.value_head_dim

    def normal(*shape: int) -> jax.Array:
        # Cast on the host (float64, float32, then the case's dtype) and copied: no device program.
        return jax.device_put(rng.standard_normal(shape).astype(np.float32).astype(dtype))

    kwargs: dict[str, Any] = {
        "scale": case.scale,
        "is_causal": case.is_causal,
        "local_window_size": case.window,
        "logits_soft_cap": case.soft_cap,
    }
    if case.segments is not None:
        kwargs["segment_ids"] = _segment_ids(case, rng)
    query, key = normal(b, t, n, h), normal(b, s, k, h)
    value, cotangent = normal(b, s, k, hv), normal(b, t, n, hv)
    # Sinks in float32 (learned logits are kept so), spread so that some take most of a row's
    # weight and some almost none.
    sinks = (
        jax.device_put((2.0 * rng.standard_normal(n)).astype(np.float32)) if case.sinks else None
    )
    return CaseInputs(
        query=query,
        key=key,
        value=value,
        cotangent=cotangent,
        kwargs=kwargs,
        seed=seed,
        sinks=sinks,
    )


def _float64(x: Any) -> np.ndarray:
    """``x`` on the host in float64 (exact from bfloat16 and float32; no device program)."""
    return np.asarray(x).astype(np.float64)


def compare(label: str, got: jax.Array, want: np.ndarray, tol: float) -> str | None:
    """One line when ``got`` is off ``want`` (float64): another shape, a non-finite value, or
    ``max |got - want| > tol * max(1, max |want|)``; ``None`` when it agrees."""
    got64 = _float64(got)
    if got64.shape != want.shape:
        return f"{label}: shape {got64.shape}, expected {want.shape}"
    if not np.all(np.isfinite(got64)):
        return f"{label}: {int(np.sum(~np.isfinite(got64)))} non-finite values"
    err = float(np.max(np.abs(got64 - want))) if want.size else 0.0
    bound = tol * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    if err > bound:
        return f"{label}: max abs error {err:.3g} > {bound:.3g}"
    return None


def _round_up(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def tiled(case: ConformanceCase, tile: int) -> ConformanceCase:
    """``case`` at lengths that are multiples of ``tile``: the shorter side rounded up, the
    longer side keeping at least its lead over it (so a case of queries past the keys' end, or
    of more keys than queries, keeps its rows that see no key or its cross attention); its
    features (masks, segments, heads, dtype) unchanged."""
    short = _round_up(min(case.q_len, case.kv_len), tile)
    long = _round_up(short + abs(case.q_len - case.kv_len), tile)
    q_len, kv_len = (long, short) if case.q_len > case.kv_len else (short, long)
    return dataclasses.replace(case, q_len=q_len, kv_len=kv_len)


def refusal(implementation: str, case: ConformanceCase, seed: int | None = None) -> str | None:
    """Why ``implementation`` refuses ``case`` (its contract gate or its ``check``, on the
    case's inputs), or ``None`` when it serves it."""
    kernel = get_kernel(implementation)
    case = tiled(case, getattr(kernel, "sequence_tile", 1))
    inputs = make_inputs(case, 0 if seed is None else seed)
    spec, _ = make_spec(inputs.query, inputs.key, inputs.value, sinks=inputs.sinks, **inputs.kwargs)
    return contract_reason(kernel, spec) or kernel.check(spec)


def _refused_new_feature(implementation: str, case: ConformanceCase, reason: str) -> list[str]:
    """A kernel may pass a contract 1.3 feature over, if its reason names the feature and a
    call naming the kernel raises; anything else is a failure."""
    words = {"sinks": "sink", "value_head_dim": "value head dim"}
    if not any(words[f] in reason.lower() for f in case.new_features):
        return [f"[{case.name}] refused without naming {', '.join(case.new_features)}: {reason}"]
    inputs = make_inputs(case, 0)
    try:
        dot_product_attention(
            inputs.query, inputs.key, inputs.value, sinks=inputs.sinks,
            implementation=implementation, **inputs.kwargs,
        )  # fmt: skip
    except ValueError:
        return []
    return [f"[{case.name}] refused ({reason}) yet served when named"]


def run_case(implementation: str, case: ConformanceCase, seed: int | None = None) -> list[str]:
    """Check forward and dq/dk/dv (and d sinks) of ``implementation`` on ``case``; return the
    failures.

    An empty list means the kernel conforms on this case. Each failure names the seed, so
    ``ZOO_TEST_SEED=<seed>`` replays it. A kernel with a ``sequence_tile`` runs the case at
    lengths rounded up to it (:func:`tiled`). A case of a contract 1.3 feature
    (``case.new_features``) that the kernel does not claim passes when the kernel refuses it
    with a reason naming the feature (and raises when named).
    """
    seed = fresh_seed() if seed is None else seed
    if case.new_features:
        reason = refusal(implementation, case, seed)
        if reason is not None:
            return _refused_new_feature(implementation, case, reason)
    case = tiled(case, getattr(get_kernel(implementation), "sequence_tile", 1))
    inputs = make_inputs(case, seed)
    tol = TOLERANCES[case.dtype]

    ids = inputs.kwargs.get("segment_ids")
    static = {k: v for k, v in inputs.kwargs.items() if k != "segment_ids"}

    @jax.jit
    def forward_and_gradients(q, k, v, sinks, ids, cotangent):  # type: ignore[no-untyped-def]
        # One program for the output and its gradients: one compile per case.
        def attend(q: jax.Array, k: jax.Array, v: jax.Array, sinks: Any) -> jax.Array:
            return dot_product_attention(
                q, k, v, sinks=sinks, segment_ids=ids, implementation=implementation, **static
            )

        out, vjp = jax.vjp(attend, q, k, v, sinks)
        return out, vjp(cotangent)

    out, (dq, dk, dv, dsinks) = forward_and_gradients(
        inputs.query, inputs.key, inputs.value, inputs.sinks, ids, inputs.cotangent
    )

    def f32(x: jax.Array) -> np.ndarray:
        return np.asarray(x).astype(np.float32)

    ref = reference_attention(
        f32(inputs.query),
        f32(inputs.key),
        f32(inputs.value),
        scale=case.scale,
        is_causal=case.is_causal,
        segment_ids=None
        if ids is None
        else (np.asarray(ids[0]), np.asarray(ids[1]))
        if isinstance(ids, tuple)
        else np.asarray(ids),
        local_window_size=case.window,
        logits_soft_cap=case.soft_cap,
        sinks=None if inputs.sinks is None else np.asarray(inputs.sinks),
        cotangent=f32(inputs.cotangent),
    )
    # A cotangent was given, so the reference returns the gradients and the rows' visibility.
    assert ref.dq is not None and ref.dk is not None and ref.dv is not None
    assert ref.row_sees_key is not None
    failures = []
    if out.dtype != inputs.query.dtype:
        failures.append(f"output dtype {out.dtype}, expected {inputs.query.dtype}")
    checks = [
        ("out", out, ref.out, tol["out"]),
        ("dq", dq, ref.dq, tol["grad"]),
        ("dk", dk, ref.dk, tol["grad"]),
        ("dv", dv, ref.dv, tol["grad"]),
    ]
    if ref.dsinks is not None:
        checks.append(("dsinks", dsinks, ref.dsinks, tol["grad"]))
    for label, got, want, t in checks:
        problem = compare(label, got, want, t)
        if problem:
            failures.append(problem)
    empty = ~ref.row_sees_key.transpose(0, 2, 1)  # [B, T, N]
    if case.expect_empty_rows and not empty.any():
        failures.append("case meant to have rows that see no key has none (bad case)")
    if empty.any():
        leaked = f32(out)[empty]
        if np.any(leaked != 0):
            failures.append(f"rows that see no key are not zero (max {np.abs(leaked).max():.3g})")
    return [f"[{case.name} seed={seed}] {f}" for f in failures]


def named_scope_failures(implementation: str, seed: int | None = None) -> list[str]:
    """Check that a jitted call carries the kernel's named scope in its HLO metadata."""
    kernel = get_kernel(implementation)
    rng = np.random.default_rng(fresh_seed() if seed is None else seed)
    length = _round_up(16, getattr(kernel, "sequence_tile", 1))
    q = jnp.asarray(rng.standard_normal((1, length, 2, 64)), jnp.float32)
    fn = jax.jit(lambda q: dot_product_attention(q, q, q, implementation=implementation))
    text = fn.lower(q).as_text(debug_info=True)
    want = scope_name(kernel.name, kernel.version)
    return [] if want in text else [f"named scope {want!r} not found in the lowered HLO"]
