import pytest

import zoo_attention


@pytest.fixture(autouse=True, scope="session")
def _reference_attention():
    # The loop core's tests run on the reference kernel whatever else is installed. Session
    # scope, so module-scoped fixtures (runs shared by several tests) see it too.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(zoo_attention.ENV_VAR, "xla")
        yield


@pytest.fixture(autouse=True, scope="session")
def _work_in_a_temporary_directory(tmp_path_factory):
    # A command run without --out writes runs/... into the working directory: a temporary one,
    # never the repository.
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("cwd"))
        yield
