"""The float32 matmul peak of this machine, measured with jax and with torch."""

from __future__ import annotations

from typing import Any

from ._stats import median, time_calls

PEAK_SIZE = 2048


def _jax_matmul() -> Any:
    # Compiled as zoo's train step is, so the peak and the GEMM rates are the step's own.
    import jax
    import jax.numpy as jnp

    import zoo_train

    return jax.jit(jnp.matmul, compiler_options=zoo_train.step_compiler_options())


def jax_matmul_gflops(n: int = PEAK_SIZE, repeats: int = 7) -> dict[str, Any]:
    """GFLOP/s of a jitted ``[n, n] @ [n, n]`` float32 matmul (2 n³ FLOPs), median and best."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
    f = _jax_matmul().lower(a, b).compile()
    f(a, b).block_until_ready()
    times = time_calls(lambda: f(a, b).block_until_ready(), repeats)
    return _summary(n, times)


def torch_matmul_gflops(n: int = PEAK_SIZE, repeats: int = 7) -> dict[str, Any]:
    """GFLOP/s of a torch ``[n, n] @ [n, n]`` float32 matmul (2 n³ FLOPs), median and best."""
    import torch

    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g)
    b = torch.randn(n, n, generator=g)
    with torch.no_grad():
        a @ b
        times = time_calls(lambda: a @ b, repeats)
    return _summary(n, times)


def _summary(n: int, times: list[float]) -> dict[str, Any]:
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


def jax_gemm_gflops(shapes: dict[str, tuple[int, int, int]], repeats: int = 3) -> dict[str, float]:
    """Median GFLOP/s of a jitted float32 matmul at each ``(M, K, N)``."""
    import jax
    import jax.numpy as jnp

    out = {}
    for name, (m, k, n) in shapes.items():
        a = jax.random.normal(jax.random.key(0), (m, k), jnp.float32)
        b = jax.random.normal(jax.random.key(1), (k, n), jnp.float32)
        f = _jax_matmul().lower(a, b).compile()
        f(a, b).block_until_ready()
        times = time_calls(lambda f=f, a=a, b=b: f(a, b).block_until_ready(), repeats)
        out[name] = 2.0 * m * k * n / median(times) / 1e9
    return out


def torch_gemm_gflops(
    shapes: dict[str, tuple[int, int, int]], repeats: int = 3
) -> dict[str, float]:
    """Median GFLOP/s of a torch float32 matmul at each ``(M, K, N)``."""
    import torch

    out = {}
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, (m, k, n) in shapes.items():
            a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
            a @ b
            times = time_calls(lambda a=a, b=b: a @ b, repeats)
            out[name] = 2.0 * m * k * n / median(times) / 1e9
    return out
