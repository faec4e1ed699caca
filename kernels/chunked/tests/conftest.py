import pytest

import zoo_attention
from zoo_chunked import ENV_BLOCK_KV, ENV_BLOCK_Q


@pytest.fixture(autouse=True)
def resolution_log(monkeypatch: pytest.MonkeyPatch):
    """Each test in its own recording block (the kernels it resolved); tests choose their own
    kernels and block sizes."""
    for var in (zoo_attention.ENV_VAR, ENV_BLOCK_Q, ENV_BLOCK_KV):
        monkeypatch.delenv(var, raising=False)
    with zoo_attention.recording() as log:
        yield log
