"""The cross-entropy conformance cases against an installed kernel, outside pytest (what
``zoo kernels verify NAME`` runs for a cross-entropy kernel): numpy and jax only.

``verify(name, on_row=None)`` runs every case and the named-scope check (rows as
``zoo_attention.testing.verify`` gives them, and the failure count); ``verify_count()`` says
how many checks that is.
"""

from __future__ import annotations

from ...testing import verifier
from . import _check

verify, verify_count = verifier(__name__.rsplit(".", 1)[0], _check)
