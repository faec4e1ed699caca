import pytest

import zoo_attention

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def resolution_log(monkeypatch: pytest.MonkeyPatch):
    """Each test runs in its own recording block: its resolutions, its fallback warnings."""
    monkeypatch.delenv(zoo_attention.ENV_VAR, raising=False)
    monkeypatch.delenv(zoo_attention.linear.ENV_VAR, raising=False)
    with zoo_attention.recording() as log:
        yield log


@pytest.fixture
def failing_suite(pytester: pytest.Pytester):
    """``run(source, select)``: run the test module ``source`` (a conformance suite against a
    broken kernel), the tests ``-k select`` until the first failure; there must be one. Returns
    the output, which must say what broke."""

    def run(source: str, select: str) -> str:
        pytester.makepyfile(test_broken=source)
        result = pytester.runpytest_inprocess(
            "-q", "-p", "no:cacheprovider", "--maxfail=1", "-k", select
        )
        assert result.parseoutcomes().get("failed", 0) >= 1, result.stdout.str()
        return result.stdout.str()

    return run
