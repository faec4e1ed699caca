"""deltanet_tpu tests run the real kernels in Pallas interpret mode on the CPU, each test in its
own recording block with no inherited kernel override."""

import os

import pytest

import zoo_attention

os.environ["ZOO_DELTANET_TPU_INTERPRET"] = "1"


@pytest.fixture(autouse=True)
def resolution_log(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(zoo_attention.linear.ENV_VAR, raising=False)
    with zoo_attention.recording() as log:
        yield log
