"""What splash cannot serve, as one reason, decided from the call's spec before any tracing."""

from __future__ import annotations

from zoo_attention import AttentionSpec

from ._blocks import length_reason
from ._interpret import INTERPRET_VAR

#: Dtypes splash computes in (its matmuls accumulate in float32 either way).
SUPPORTED_DTYPES = ("float32", "bfloat16")
#: The widest head compiled for every generation at the policy's blocks: at 512 float32 heads
#: the dK/dV kernel overflows v4's 16 MiB of VMEM.
MAX_HEAD_DIM = 256


def unsupported_reason(spec: AttentionSpec, *, interpret: bool) -> str | None:
    """``None`` when splash can serve ``spec``, else one sentence saying why not.

    Args:
        spec: the call (one shard's under ``shard_map``).
        interpret: whether Pallas interpret mode was asked for (any platform then serves).
    """
    if spec.platform != "tpu" and not interpret:
        return (
            f"needs a TPU (the target is {spec.platform!r}); set {INTERPRET_VAR}=1 to run it in "
            "Pallas interpret mode"
        )
    if spec.dtype not in SUPPORTED_DTYPES:
        return f"dtype {spec.dtype} is not supported (float32 or bfloat16)"
    if spec.head_dim > MAX_HEAD_DIM:
        return f"head_dim {spec.head_dim} is above the supported {MAX_HEAD_DIM}"
    # zoo-attention < 1.3 has no value head dim of its own: then it is the queries'.
    v_head_dim = getattr(spec, "v_head_dim", spec.head_dim)
    if v_head_dim > MAX_HEAD_DIM:
        return f"value head dim {v_head_dim} is above the supported {MAX_HEAD_DIM}"
    return length_reason(spec.q_len, spec.kv_len)
