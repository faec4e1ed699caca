"""Float32 matmul rates of this machine, measured with jax or with torch: the peak (a square
matmul) and the rates at a model's own GEMM shapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._stats import median, time_calls

PEAK_SIZE = 2048


def _jax_timer(m: int, k: int, n: int) -> Callable[[int], list[float]]:
    import jax
    import jax.numpy as jnp

    import zoo_train

    a = jax.random.normal(jax.random.key(0), (m, k), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (k, n), jnp.float32)
    # Compiled as zoo's train step is, so the peak and the GEMM rates are the step's own.
    options = zoo_train.step_compiler_options()
    f = jax.jit(jnp.matmul, compiler_options=options).lower(a, b).compile()
    f(a, b).block_until_ready()
    return lambda repeats: time_calls(lambda: f(a, b).block_until_ready(), repeats)


def _torch_timer(m: int, k: int, n: int) -> Callable[[int], list[float]]:
    import torch

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)

    def timed(repeats: int) -> list[float]:
        with torch.no_grad():
            a @ b
            return time_calls(lambda: a @ b, repeats)

    return timed


TIMERS = {"jax": _jax_timer, "torch": _torch_timer}


def matmul_peak(framework: str, n: int = PEAK_SIZE, repeats: int = 7) -> dict[str, Any]:
    """GFLOP/s (median and best) of ``framework``'s ``[n, n] @ [n, n]`` float32 matmul."""
    times = TIMERS[framework](n, n, n)(repeats)
    flops = 2.0 * n**3
    return {
        "n": n,
        "gflops_median": flops / median(times) / 1e9,
        "gflops_best": flops / min(times) / 1e9,
        "times_s": times,
    }


def gemm_shapes(tokens: int, d_model: int, vocab: int) -> dict[str, tuple[int, int, int]]:
    """The forward GEMMs ``[M, K] @ [K, N]`` of one GPT-2 layer and the output head."""
    return {
        "qkv": (tokens, d_model, 3 * d_model),
        "attn out": (tokens, d_model, d_model),
        "mlp up": (tokens, d_model, 4 * d_model),
        "mlp down": (tokens, 4 * d_model, d_model),
        "head": (tokens, d_model, vocab),
    }


def gemm_gflops(
    framework: str, shapes: dict[str, tuple[int, int, int]], repeats: int = 3
) -> dict[str, float]:
    """Median GFLOP/s of ``framework``'s float32 matmul at each ``(M, K, N)``."""
    out = {}
    for name, (m, k, n) in shapes.items():
        out[name] = 2.0 * m * k * n / median(TIMERS[framework](m, k, n)(repeats)) / 1e9
    return out
