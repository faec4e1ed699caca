"""splash tests run the real kernels in Pallas interpret mode on the CPU; each test has its own
resolution record and chooses its own kernels."""

import os

import pytest

import zoo_attention

os.environ["ZOO_SPLASH_INTERPRET"] = "1"


@pytest.fixture(autouse=True)
def resolution_log(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(zoo_attention.ENV_VAR, raising=False)
    with zoo_attention.recording() as log:
        yield log
