"""zoo-tokamax tests: each in its own recording block with no inherited kernel override."""

import pytest

import zoo_attention


@pytest.fixture(autouse=True)
def resolution_log(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(zoo_attention.cross_entropy.ENV_VAR, raising=False)
    with zoo_attention.recording() as log:
        yield log
