"""megablox tests run the real kernel in Pallas TPU interpret mode on the CPU, each test in its
own recording block with no inherited kernel override."""

import os

import pytest

import zoo_attention

os.environ["ZOO_MEGABLOX_INTERPRET"] = "1"


@pytest.fixture(autouse=True)
def resolution_log(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(zoo_attention.grouped.ENV_VAR, raising=False)
    with zoo_attention.recording() as log:
        yield log
