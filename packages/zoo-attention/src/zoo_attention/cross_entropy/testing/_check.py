"""Running one cross-entropy case against a kernel and listing what disagrees with the
reference."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...testing import compare, fresh_seed
from .._api import linear_cross_entropy, linear_cross_entropy_loss, scope_name
from .._registry import get_kernel
from .._spec import make_spec
from ._cases import TOLERANCES, CrossEntropyCase
from ._reference import reference_cross_entropy

#: What a token that does not count carries as its target: never a vocabulary id.
IGNORED_TARGET = -100


@dataclasses.dataclass
class CrossEntropyInputs:
    """Arrays for one case: ``hidden``, ``head`` (in their dtypes), ``targets``, the loss mask
    (``None`` when the case has none), the counted tokens (bool, flat) and the cotangents of
    ``ce`` and ``log_z`` (float32, the tokens' shape)."""

    hidden: jax.Array
    head: jax.Array
    targets: jax.Array
    loss_mask: jax.Array | None
    counts: np.ndarray
    g_ce: jax.Array
    g_log_z: jax.Array
    seed: int


def _counts(case: CrossEntropyCase, rng: np.random.Generator) -> np.ndarray:
    n = math.prod(case.tokens)
    if not case.masked:
        return np.ones(n, bool)
    counts = rng.random(n) < 0.7
    # At least one token that counts and, given two or more, one that does not.
    order = rng.permutation(n)
    counts[order[0]] = True
    if n > 1:
        counts[order[1]] = False
    return counts


def make_inputs(case: CrossEntropyCase, seed: int) -> CrossEntropyInputs:
    """Random inputs for ``case``: normal hidden states and a head scaled so the logits have
    standard deviation ``case.logit_std``, uniform targets (``IGNORED_TARGET`` where a token
    does not count), a mask with both kinds of token, cotangents (zero for ``log_z`` without a
    z-loss)."""
    rng = np.random.default_rng(seed)
    n, d, v = math.prod(case.tokens), case.dim, case.vocab
    hidden = rng.standard_normal((*case.tokens, d))
    shape = (d, v) if case.head_layout == "dv" else (v, d)
    head = rng.standard_normal(shape) * case.logit_std / math.sqrt(d)
    counts = _counts(case, rng)
    targets = np.where(counts, rng.integers(0, v, n), IGNORED_TARGET).reshape(case.tokens)
    g_ce = rng.standard_normal(case.tokens)
    g_log_z = rng.standard_normal(case.tokens) if case.z_loss else np.zeros(case.tokens)
    mask = jax.device_put(counts.reshape(case.tokens)) if case.masked else None
    return CrossEntropyInputs(
        hidden=_device(hidden, case.dtype),
        head=_device(head, case.head_dtype or case.dtype),
        targets=jax.device_put(targets.astype(np.int32)),
        loss_mask=mask,
        counts=counts,
        g_ce=_device(g_ce, "float32"),
        g_log_z=_device(g_log_z, "float32"),
        seed=seed,
    )


def _device(x: np.ndarray, dtype: str) -> jax.Array:
    """``x`` cast on the host (float64, float32, then ``dtype``) and copied: no device program
    per conversion."""
    return jax.device_put(np.asarray(x).astype(np.float32).astype(jnp.dtype(dtype)))


def _f64(x: jax.Array) -> np.ndarray:
    """``x`` on the host in float64 (exact from bfloat16 and float32; no device program)."""
    return np.asarray(x).astype(np.float64)


def _dtype_failures(checks: tuple[tuple[str, jax.Array, Any], ...]) -> list[str]:
    """``"<label> dtype <got>, expected <want>"`` for each ``(label, array, want)`` that
    differs."""
    return [
        f"{label} dtype {got.dtype}, expected {jnp.dtype(want)}"
        for label, got, want in checks
        if got.dtype != jnp.dtype(want)
    ]


def _ignored_failures(
    counts: np.ndarray, ce: jax.Array, log_z: jax.Array, dh: jax.Array
) -> list[str]:
    failures = []
    d = dh.shape[-1]
    for label, got in (("ce", ce), ("log_z", log_z), ("d_hidden", dh.reshape(-1, d))):
        off = _f64(got).reshape(len(counts), -1)[~counts]
        if off.size and np.any(off != 0):
            failures.append(
                f"{label}: tokens that do not count are not zero (max {np.abs(off).max():.3g})"
            )
    return failures


def refusal(implementation: str, case: CrossEntropyCase) -> str | None:
    """Why ``implementation``'s check refuses ``case`` on this machine (a feature it declares
    it lacks: the contract falls back for such calls), or ``None`` when it serves it."""
    x = make_inputs(case, 0)
    spec = make_spec(
        x.hidden,
        x.head,
        x.targets,
        x.loss_mask,
        head_layout=case.head_layout,
        soft_cap=case.soft_cap,
        temperature=case.temperature,
    )
    return get_kernel(implementation).check(spec)


def run_case(implementation: str, case: CrossEntropyCase, seed: int | None = None) -> list[str]:
    """Check ``ce``, ``log_z`` and the gradients w.r.t. ``hidden`` and ``head`` of
    ``implementation`` on ``case``, then the summed loss on the same inputs (through the
    kernel's own or its per-token call); return the failures (empty: it conforms). Each names
    the seed, so ``ZOO_TEST_SEED=<seed>`` replays it. A case the kernel's check refuses (see
    :func:`refusal`) is not run: calls like it fall back to another kernel."""
    if refusal(implementation, case) is not None:
        return []
    seed = fresh_seed() if seed is None else seed
    x = make_inputs(case, seed)
    tol = TOLERANCES[case.dtype]

    def call(h: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
        return linear_cross_entropy(
            h,
            w,
            x.targets,
            loss_mask=x.loss_mask,
            head_layout=case.head_layout,
            soft_cap=case.soft_cap,
            temperature=case.temperature,
            implementation=implementation,
        )

    @jax.jit
    def outputs_and_gradients(
        h: jax.Array, w: jax.Array, g_ce: jax.Array, g_log_z: jax.Array
    ) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
        # One program for the outputs and their gradients: one compile per case.
        outputs, vjp = jax.vjp(call, h, w)
        return outputs, vjp((g_ce, g_log_z))

    (ce, log_z), (dh, dw) = outputs_and_gradients(x.hidden, x.head, x.g_ce, x.g_log_z)
    n = len(x.counts)
    # The reference computes what the contract does: the head cast to the hidden dtype.
    ref = reference_cross_entropy(
        _f64(x.hidden).reshape(n, case.dim),
        _f64(x.head).astype(x.hidden.dtype).astype(np.float64),
        np.asarray(x.targets).reshape(n),
        x.counts,
        head_layout=case.head_layout,
        soft_cap=case.soft_cap,
        temperature=case.temperature,
        g_ce=_f64(x.g_ce).reshape(n),
        g_log_z=_f64(x.g_log_z).reshape(n),
    )
    assert ref.d_hidden is not None and ref.d_head is not None  # cotangents were given
    failures = _dtype_failures(
        (
            ("ce", ce, jnp.float32),
            ("log_z", log_z, jnp.float32),
            ("d_hidden", dh, x.hidden.dtype),
            ("d_head", dw, x.head.dtype),
        )
    )
    for label, got, want, t in (
        ("ce", ce.reshape(n), ref.ce, tol["out"]),
        ("log_z", log_z.reshape(n), ref.log_z, tol["out"]),
        ("d_hidden", dh.reshape(n, case.dim), ref.d_hidden, tol["grad"]),
        ("d_head", dw, ref.d_head, tol["grad"]),
    ):
        problem = compare(label, got, want, t)
        if problem:
            failures.append(problem)
    failures += _ignored_failures(x.counts, ce, log_z, dh)
    failures += _loss_failures(implementation, case, x)
    return [f"[{case.name} seed={seed}] {f}" for f in failures]


#: The z-loss weight of a case with a z-loss in the summed check (large, so the term counts).
Z_LOSS = 0.3


def _loss_failures(implementation: str, case: CrossEntropyCase, x: CrossEntropyInputs) -> list[str]:
    """The summed loss (``linear_cross_entropy_loss``) on the same inputs: random weights on
    the counted tokens (``None`` without a mask), ``z_loss`` :data:`Z_LOSS` when the case has
    a z-loss, a random loss cotangent; the loss, its metrics and the gradients of the hidden
    states and the head against float64 numpy."""
    rng = np.random.default_rng(x.seed + 1)
    n = len(x.counts)
    w64 = np.where(x.counts, rng.uniform(0.25, 2.0, n), 0.0)
    weights = None if x.loss_mask is None else jnp.asarray(w64.reshape(case.tokens), jnp.float32)
    w64 = np.asarray(np.ones(n) if weights is None else weights, np.float64).reshape(n)
    z = Z_LOSS if case.z_loss else 0.0
    g = float(rng.uniform(0.5, 2.0))

    def call(h: jax.Array, w: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        return linear_cross_entropy_loss(
            h,
            w,
            x.targets,
            weights,
            z_loss=z,
            head_layout=case.head_layout,
            soft_cap=case.soft_cap,
            temperature=case.temperature,
            implementation=implementation,
        )

    @jax.jit
    def loss_and_gradients(
        h: jax.Array, w: jax.Array
    ) -> tuple[tuple[jax.Array, dict[str, jax.Array]], tuple[jax.Array, jax.Array]]:
        # One program for the loss, its metrics and the gradients: one compile per case.
        (loss, metrics), vjp = jax.vjp(call, h, w)
        zero = jax.tree.map(jnp.zeros_like, metrics)
        return (loss, metrics), vjp((jnp.asarray(g, jnp.float32), zero))

    (loss, metrics), (dh, dw) = loss_and_gradients(x.hidden, x.head)
    common: dict[str, Any] = {
        "hidden": _f64(x.hidden).reshape(n, case.dim),
        "head": _f64(x.head).astype(x.hidden.dtype).astype(np.float64),
        "targets": np.asarray(x.targets).reshape(n),
        "counts": x.counts,
        "head_layout": case.head_layout,
        "soft_cap": case.soft_cap,
        "temperature": case.temperature,
    }
    out = reference_cross_entropy(**common)
    ce_sum, z_sum = np.sum(w64 * out.ce), np.sum(w64 * out.log_z**2)
    ref = reference_cross_entropy(**common, g_ce=g * w64, g_log_z=g * 2 * z * w64 * out.log_z)
    assert ref.d_hidden is not None and ref.d_head is not None  # cotangents were given
    tol = TOLERANCES[case.dtype]
    failures = []
    for label, got, want, t in (
        ("loss_sum", loss, np.asarray(ce_sum + z * z_sum), tol["out"]),
        ("metrics ce", metrics["ce"], np.asarray(ce_sum), tol["out"]),
        ("metrics log_z_squared", metrics["log_z_squared"], np.asarray(z_sum), tol["out"]),
        ("loss d_hidden", dh.reshape(n, case.dim), ref.d_hidden, tol["grad"]),
        ("loss d_head", dw, ref.d_head, tol["grad"]),
    ):
        problem = compare(label, got, want, t)
        if problem:
            failures.append(problem)
    failures += _dtype_failures(
        (
            ("loss_sum", loss, jnp.float32),
            ("loss d_hidden", dh, x.hidden.dtype),
            ("loss d_head", dw, x.head.dtype),
        )
    )
    return failures


def named_scope_failures(implementation: str, seed: int | None = None) -> list[str]:
    """Check that a jitted call carries the kernel's named scope in its HLO metadata."""
    kernel = get_kernel(implementation)
    rng = np.random.default_rng(fresh_seed() if seed is None else seed)
    hidden = jnp.asarray(rng.standard_normal((2, 8, 16)), jnp.float32)
    head = jnp.asarray(rng.standard_normal((16, 200)), jnp.float32)
    targets = jnp.asarray(rng.integers(0, 200, (2, 8)), jnp.int32)
    fn = jax.jit(lambda h: linear_cross_entropy(h, head, targets, implementation=implementation))
    text = fn.lower(hidden).as_text(debug_info=True)
    want = scope_name(kernel.name, kernel.version)
    return [] if want in text else [f"named scope {want!r} not found in the lowered HLO"]
