"""The linear-attention conformance cases against an installed kernel, outside pytest (what
``zoo kernels verify NAME`` runs for a linear-attention kernel): numpy and jax only."""

from __future__ import annotations

from ...testing import verifier
from . import _check

#: ``verify(name, on_row=None) -> (rows, failures)``: every case of
#: ``zoo_attention.linear.testing.CASES`` against kernel ``name``, then the named scope;
#: ``verify_count()``: how many checks that is.
verify, verify_count = verifier(__package__ or "zoo_attention.linear.testing", _check)
