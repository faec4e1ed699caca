"""``TransformerBlock``: a residual block (attention, then MLP).

``x + post_attn(attn(attn_norm(x)))`` then ``x + post_mlp(mlp(mlp_norm(x)))``. Every norm is
optional: pre-norm models (Llama) have the two pre-norms, Gemma 2 and 3 add the post norms, OLMo 2
has only the post norms. Dropout acts on each branch before it joins the residual.
"""

from __future__ import annotations

import equinox as eqx
import jax
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._attention import Attention
from ._dropout import Dropout
from ._mlp import MLP
from ._norm import LayerNorm, RMSNorm

Norm = LayerNorm | RMSNorm


class TransformerBlock(eqx.Module):
    """One decoder layer. Input and output ``[B, T, D]`` in the compute dtype.

    A norm that is ``None`` is the identity.
    """

    attn_norm: Norm | None
    attn: Attention
    mlp_norm: Norm | None
    mlp: MLP
    post_attn_norm: Norm | None = None
    post_mlp_norm: Norm | None = None
    dropout: Dropout = Dropout(0.0)

    def __call__(
        self,
        x: Float[Array, "B T D"],
        positions: Int[Array, "B T"],
        segment_ids: Int[Array, "B T"] | None = None,
        *,
        key: PRNGKeyArray | None = None,
    ) -> Float[Array, "B T D"]:
        k1, k2 = (None, None) if key is None else jax.random.split(key)
        h = self.attn(self._norm(self.attn_norm, x), positions, segment_ids)
        x = x + self.dropout(self._norm(self.post_attn_norm, h), key=k1)
        return self._mlp_branch(x, k2)

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
        return self._mlp_branch(x, None), k_new, v_new

    def _mlp_branch(self, x: Array, key: PRNGKeyArray | None) -> Array:
        h = self.mlp(self._norm(self.mlp_norm, x))
        return x + self.dropout(self._norm(self.post_mlp_norm, h), key=key)

    @staticmethod
    def _norm(norm: Norm | None, h: Array) -> Array:
        return h if norm is None else norm(h)
