import pytest

import zoo_attention
from zoo_chunked import ENV_BLOCK_KV, ENV_BLOCK_Q


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch):
    # Tests choose their own kernels and block sizes.
    for var in (zoo_attention.ENV_VAR, ENV_BLOCK_Q, ENV_BLOCK_KV):
        monkeypatch.delenv(var, raising=False)
    zoo_attention.clear_resolutions()
    yield
    zoo_attention.clear_resolutions()
