import pytest

import zoo_attention

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _fresh_resolutions(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(zoo_attention.ENV_VAR, raising=False)
    zoo_attention.clear_resolutions()
    yield
    zoo_attention.clear_resolutions()
