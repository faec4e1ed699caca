import os

# Tiny models compile far longer than they run: a lower XLA CPU optimisation level halves compile
# time. Set before any backend starts; subprocesses the tests launch inherit it.
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    ).strip()

import pytest

import zoo_attention


@pytest.fixture(autouse=True, scope="session")
def _reference_attention():
    # The loop core's tests run on the reference kernel whatever else is installed. Session
    # scope, so module-scoped fixtures (runs shared by several tests) see it too.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(zoo_attention.ENV_VAR, "xla")
        yield
