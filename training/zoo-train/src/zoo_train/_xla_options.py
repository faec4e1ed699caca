"""XLA compiler options of the jitted train and evaluation steps, per backend."""

from __future__ import annotations

import jax

# XLA:CPU hands dots to YNNPACK fusions by default. For the small batched matmuls of blockwise
# attention (head dim 64) those run at about half the speed of XLA's Eigen path (measured on a
# 2-core AVX-512 host: [24, 256, 64] @ [24, 64, 256] at 64 against 111 GFLOP/s), while the large
# projection matmuls run at the same speed either way. An empty list turns the fusions off.
_CPU_OPTIONS: dict[str, str] = {"xla_cpu_experimental_ynn_fusion_type": ""}


def step_compiler_options(backend: str | None = None) -> dict[str, str]:
    """The options zoo compiles its steps with on ``backend`` (default: JAX's default backend).

    Empty except on CPU; see the comment above for what is set there and why.
    """
    backend = jax.default_backend() if backend is None else backend
    return dict(_CPU_OPTIONS) if backend == "cpu" else {}
