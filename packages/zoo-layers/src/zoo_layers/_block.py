"""``TransformerBlock``: a residual block (token mixing, then MLP).

``x + post_attn(attn(attn_norm(x)))`` then ``x + post_mlp(mlp(mlp_norm(x)))``. Every norm is
optional: pre-norm models (Llama) have the two pre-norms, Gemma 2 and 3 add the post norms, OLMo 2
has only the post norms. Dropout acts on each branch before it joins the residual. The MLP may be
a mixture of experts (:class:`zoo_layers.MoE`), whose router statistics :meth:`apply` returns.
The token mixer is attention or a gated DeltaNet (:class:`zoo_layers.deltanet.GatedDeltaNet`,
Qwen3.5's linear-attention layers), which decodes with a recurrent state instead of a KV cache.
"""

from __future__ import annotations

import equinox as eqx
import jax
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._attention import Attention
from ._chunked import chunked_tokens
from ._dropout import Dropout
from ._latent_attention import LatentAttention
from ._mlp import MLP
from ._norm import LayerNorm, RMSNorm
from .deltanet import GatedDeltaNet
from .moe import MoE, RouterStats

Norm = LayerNorm | RMSNorm


class TransformerBlock(eqx.Module):
    """One decoder layer. Input and output ``[B, T, D]`` in the compute dtype.

    A norm that is ``None`` is the identity. With ``mlp_chunk``, a dense MLP branch (norms
    included) runs over chunks of that many tokens of the sequence, each rematerialised
    (:func:`chunked_tokens`), so its hidden activations exist one chunk at a time; it applies
    to sequences longer than the chunk and a multiple of it, without active dropout. The
    result is the same up to the order of float32 sums.
    """

    attn_norm: Norm | None
    attn: Attention | LatentAttention | GatedDeltaNet
    mlp_norm: Norm | None
    mlp: MLP | MoE
    post_attn_norm: Norm | None = None
    post_mlp_norm: Norm | None = None
    dropout: Dropout = Dropout(0.0)
    mlp_chunk: int | None = eqx.field(static=True, default=None)

    def __call__(
        self,
        x: Float[Array, "B T D"],
        positions: Int[Array, "B T"],
        segment_ids: Int[Array, "B T"] | None = None,
        *,
        key: PRNGKeyArray | None = None,
    ) -> Float[Array, "B T D"]:
        return self.apply(x, positions, segment_ids, key=key)[0]

    def apply(
        self,
        x: Float[Array, "B T D"],
        positions: Int[Array, "B T"],
        segment_ids: Int[Array, "B T"] | None = None,
        *,
        key: PRNGKeyArray | None = None,
        mask: Array | None = None,
        keep_logits: bool = False,
    ) -> tuple[Float[Array, "B T D"], RouterStats | None]:
        """The block and, for a mixture of experts, its router's statistics over the tokens
        ``mask`` keeps (``None``: all; ``keep_logits``: with the router logits)."""
        k1, k2 = (None, None) if key is None else jax.random.split(key)
        # Named scopes: compiled programs, profiles and `zoo compile`'s peak name what each
        # branch computes and holds.
        with jax.named_scope("attention"):
            h = self.attn(self._norm(self.attn_norm, x), positions, segment_ids)
            x = x + self.dropout(self._norm(self.post_attn_norm, h), key=k1)
        with jax.named_scope("mlp"):
            return self._mlp_branch(x, k2, mask, keep_logits)

    def decode(
        self,
        x: Float[Array, "B t D"],
        positions: Int[Array, "B t"],
        cache_key: Float[Array, "B S K H"],
        cache_value: Float[Array, "B S K H"],
        slot_positions: Int[Array, "B S"],
        slot_valid: Bool[Array, "B S"],
        start: Int[Array, ""],
    ) -> tuple[Float[Array, "B t D"], Float[Array, "B t K H"], Float[Array, "B t K H"]]:
        """The block for ``t`` new tokens against a cache; see :meth:`Attention.decode`."""
        assert not isinstance(self.attn, GatedDeltaNet)
        h, k_new, v_new = self.attn.decode(
            self._norm(self.attn_norm, x),
            positions,
            cache_key,
            cache_value,
            slot_positions,
            slot_valid,
            start,
        )
        x = x + self._norm(self.post_attn_norm, h)
        return self._mlp_branch(x, None)[0], k_new, v_new

    @property
    def is_linear(self) -> bool:
        """Whether the token mixer is a gated DeltaNet (decoded with a state, not a KV cache)."""
        return isinstance(self.attn, GatedDeltaNet)

    def decode_linear(
        self,
        x: Float[Array, "B t D"],
        conv_state: Float[Array, "B W1 C"],
        state: Float[Array, "B N Dk Dv"],
        mask: Bool[Array, "B t"] | None = None,
    ) -> tuple[Float[Array, "B t D"], Float[Array, "B W1 C"], Float[Array, "B N Dk Dv"]]:
        """The block for ``t`` new tokens of a gated DeltaNet layer; see
        :meth:`GatedDeltaNet.decode`."""
        assert isinstance(self.attn, GatedDeltaNet)
        h, conv_state, state = self.attn.decode(
            self._norm(self.attn_norm, x), conv_state, state, mask
        )
        x = x + self._norm(self.post_attn_norm, h)
        return self._mlp_branch(x, None)[0], conv_state, state

    def _mlp_branch(
        self,
        x: Array,
        key: PRNGKeyArray | None,
        mask: Array | None = None,
        keep_logits: bool = False,
    ) -> tuple[Array, RouterStats | None]:
        stats = None
        if isinstance(self.mlp, MoE):
            h, stats = self.mlp(self._norm(self.mlp_norm, x), mask, keep_logits=keep_logits)
        elif self._chunks(x, key):
            assert self.mlp_chunk is not None
            parts = (self.mlp_norm, self.mlp, self.post_mlp_norm)
            return chunked_tokens(_dense_branch, parts, x, self.mlp_chunk), None
        else:
            h = self.mlp(self._norm(self.mlp_norm, x))
        return x + self.dropout(self._norm(self.post_mlp_norm, h), key=key), stats

    def _chunks(self, x: Array, key: PRNGKeyArray | None) -> bool:
        """Whether the MLP branch runs in chunks (see the class)."""
        chunk = self.mlp_chunk
        dropout = key is not None and self.dropout.rate > 0.0
        if not chunk or dropout or x.ndim != 3:
            return False
        return x.shape[1] > chunk and x.shape[1] % chunk == 0

    @staticmethod
    def _norm(norm: Norm | None, h: Array) -> Array:
        return h if norm is None else norm(h)


def _dense_branch(parts: tuple[Norm | None, MLP, Norm | None], x: Array) -> Array:
    """``x + post_norm(mlp(norm(x)))``: the dense MLP branch of a block, token by token."""
    norm, mlp, post = parts
    h = mlp(x if norm is None else norm(x))
    return x + (h if post is None else post(h))
