import pytest

import zoo_attention

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def resolution_log(monkeypatch: pytest.MonkeyPatch):
    """Each test runs in its own recording block: its resolutions, its fallback warnings."""
    monkeypatch.delenv(zoo_attention.ENV_VAR, raising=False)
    with zoo_attention.recording() as log:
        yield log
