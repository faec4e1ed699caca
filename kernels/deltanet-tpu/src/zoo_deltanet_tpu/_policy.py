"""The block-size policy: how long a chunk is, and which head widths fit VMEM.

A grid step holds one chunk of one (row, head): ``[C, Dk]`` queries and keys, ``[C, Dv]``
values, per-token scalars (each ``[C, 1]`` padded to 128 lanes), the ``[Dk, Dv]`` state, and
the chunk's ``[C, C]`` and ``[C, D]`` temporaries (about twice as many in the backward pass,
which runs the chunk and its derivative). :func:`vmem_bytes` estimates that, double-buffered
where Pallas pipelines; a call whose estimate passes :data:`VMEM_BUDGET` (the smallest default
scoped VMEM of v5e, v5p and v6e: 16 MiB) is refused.
"""

from __future__ import annotations

from zoo_attention.linear import CHUNK, chunk_size

LANES = 128
#: The smallest default scoped-VMEM limit of the TPU generations served (v5e: 16 MiB).
VMEM_BUDGET = 16 * 2**20


def _padded(width: int) -> int:
    return -(-width // LANES) * LANES


def vmem_bytes(seq_len: int, key_dim: int, value_dim: int) -> int:
    """Estimated VMEM of the backward kernel (the larger) for one grid step."""
    c = chunk_size(seq_len)
    dk, dv, lanes_c = _padded(key_dim), _padded(value_dim), _padded(c)
    blocks = c * (4 * dk + 3 * dv + 6 * LANES) + 3 * dk * dv  # inputs and outputs of a step
    temporaries = 24 * c * lanes_c + 12 * c * max(dk, dv) + 4 * dk * dv
    return 4 * (2 * blocks + temporaries)


def shape_problem(seq_len: int, key_dim: int, value_dim: int) -> str | None:
    """Why a call of these widths cannot run here, or ``None``."""
    need = vmem_bytes(seq_len, key_dim, value_dim)
    if need > VMEM_BUDGET:
        return (
            f"key_dim {key_dim} and value_dim {value_dim} need about {need / 2**20:.1f} MiB of "
            f"VMEM a step, over the {VMEM_BUDGET // 2**20} MiB budget"
        )
    return None


__all__ = ["CHUNK", "LANES", "VMEM_BUDGET", "chunk_size", "shape_problem", "vmem_bytes"]
