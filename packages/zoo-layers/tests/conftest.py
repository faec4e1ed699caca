import zlib

import jax
import pytest

import zoo_attention


@pytest.fixture(autouse=True)
def _fresh_attention(monkeypatch: pytest.MonkeyPatch):
    # Tests pick kernels explicitly; an inherited override must not change what they check.
    monkeypatch.delenv(zoo_attention.ENV_VAR, raising=False)
    monkeypatch.delenv(zoo_attention.grouped.ENV_VAR, raising=False)
    return


@pytest.fixture
def key(request: pytest.FixtureRequest) -> jax.Array:
    """A fresh key per test (seeded from the test name, so failures reproduce)."""
    return jax.random.key(zlib.crc32(request.node.nodeid.encode()))
