"""Tests on eight fake CPU devices (``make test`` runs this suite in a process of its own)."""

import os
import pathlib
import subprocess
from collections.abc import Callable

# Before jax is imported by anything: a second chance when the suite is run by hand.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import pytest
from mesh_helpers import zoo_process

import zoo_attention

DEVICES = 8


def pytest_configure(config: pytest.Config) -> None:
    if len(jax.devices()) != DEVICES:
        raise pytest.UsageError(
            f"tests/multidevice needs {DEVICES} devices, found {len(jax.devices())}; run it with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={DEVICES} in a fresh process "
            "(`python scripts/run_tests.py multidevice`)."
        )


def _one_device_zoo(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    return zoo_process(1, *args, cwd=cwd)


@pytest.fixture(scope="session")
def one_device_zoo() -> Callable[..., subprocess.CompletedProcess]:
    """``one_device_zoo(*args, cwd=None)``: the ``zoo`` command in a process of its own that
    sees one CPU device, the reference a mesh run is compared with."""
    return _one_device_zoo


@pytest.fixture(autouse=True)
def _fresh_attention(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(zoo_attention.ENV_VAR, raising=False)
    monkeypatch.delenv("ZOO_FLASH_TPU_INTERPRET", raising=False)
