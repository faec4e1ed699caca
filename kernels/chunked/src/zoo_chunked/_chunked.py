"""``ChunkedKernel``: the blockwise attention kernel behind the zoo attention contract."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoo_attention import AttentionKernel, AttentionSpec

from ._policy import BlockSizes, make_plan, positive_block, resolve_block_sizes
from ._vjp import chunked_attention

_SUPPORTED_DTYPES = ("float16", "bfloat16", "float32", "float64")


class ChunkedKernel(AttentionKernel):
    """Pure-JAX blockwise attention with online softmax: O(T) memory on every backend.

    Serves contract 1.2's query offset (sequence-sharded calls): the offset shifts the query
    positions of the masks and of the block ranges the loops visit. Serves contract 1.3's
    sinks (they join each row's running max and sum after its keys) and a value head dim of
    its own.

    The default kernel on CPU (priority 1 there, ahead of ``xla``): it is faster than ``xla``
    from short sequences on and its memory grows linearly in T. On GPU and TPU it serves only
    when named, ``implementation="chunked"`` or ``ZOO_ATTENTION=chunked``.

    Args:
        block_q: upper bound on the query block length; default ``$ZOO_CHUNKED_BLOCK_Q`` or
            the platform default (256 on CPU).
        block_kv: upper bound on the key/value block length; default
            ``$ZOO_CHUNKED_BLOCK_KV`` or the platform default.

    Raises:
        ValueError: a block length that is not a positive int.
    """

    name = "chunked"
    priority = 1
    # Contract 1.3: values may have a head dim of their own (multi-head latent attention).
    separate_value_head_dim = True

    @property
    def platforms(self) -> tuple[str, ...]:
        """Backends whose default order includes it: CPU only (its GPU/TPU speed is unmeasured)."""
        return ("cpu",)

    def __init__(self, block_q: int | None = None, block_kv: int | None = None) -> None:
        # Explicit sizes are checked now; the environment is read per call.
        self.block_q = None if block_q is None else positive_block(block_q, "`block_q`")
        self.block_kv = None if block_kv is None else positive_block(block_kv, "`block_kv`")

    def block_sizes(self, platform: str) -> BlockSizes:
        """The block-length bounds a call on ``platform`` would use now."""
        return resolve_block_sizes(platform, self.block_q, self.block_kv)

    def check(self, spec: AttentionSpec) -> str | None:
        if spec.dtype not in _SUPPORTED_DTYPES:
            return (
                f"dtype {spec.dtype} is not supported; use one of {', '.join(_SUPPORTED_DTYPES)}."
            )
        try:
            self.block_sizes(spec.platform)
        except ValueError as err:
            return str(err)
        return None

    def __call__(
        self,
        query: jax.Array,
        key: jax.Array,
        value: jax.Array,
        segment_ids: tuple[jax.Array, jax.Array] | None,
        spec: AttentionSpec,
        *,
        query_offset: jax.Array | None = None,
        sinks: jax.Array | None = None,
    ) -> jax.Array:
        plan = make_plan(spec, self.block_sizes(spec.platform))
        q_ids, kv_ids = (None, None) if segment_ids is None else segment_ids
        if q_ids is not None:
            q_ids, kv_ids = jnp.asarray(q_ids, jnp.int32), jnp.asarray(kv_ids, jnp.int32)
        offset = jnp.asarray(0 if query_offset is None else query_offset, jnp.int32)
        return chunked_attention(query, key, value, q_ids, kv_ids, offset, sinks, plan)


KERNEL = ChunkedKernel()
