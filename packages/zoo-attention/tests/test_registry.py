"""Entry-point discovery, contract-version refusal, and direct registration."""

import sys
import textwrap

import jax.numpy as jnp
import pytest

import zoo_attention
from zoo_attention import AttentionKernel, KernelRegistrationError


def _install_fake_distribution(
    root, dist: str, version: str, module: str, kernel_name: str, contract: str
):
    """A real installed distribution on sys.path: a module and a dist-info with an entry point."""
    (root / f"{module}.py").write_text(
        textwrap.dedent(
            f"""
            from zoo_attention import AttentionKernel
            from zoo_attention._xla import KERNEL as XLA

            class Fake(AttentionKernel):
                name = {kernel_name!r}
                contract_version = {contract!r}
                priority = 0

                def check(self, spec):
                    return None

                def __call__(self, q, k, v, ids, spec):
                    return XLA(q, k, v, ids, spec)

            KERNEL = Fake()
            """
        )
    )
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        f"[zoo.attention_kernels]\n{kernel_name} = {module}:KERNEL\n"
    )


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("fake_ok_kernel", None)
    sys.modules.pop("fake_v2_kernel", None)
    monkeypatch.undo()
    zoo_attention.reload_kernels()


# A development version (sources changed since 3.2.1) keeps its marker in the record.
@pytest.mark.parametrize("version", ["3.2.1", "3.2.2.dev0"])
def test_entry_point_kernel_is_registered_with_its_distribution_version(
    site, version, resolution_log
):
    _install_fake_distribution(site, "fake-ok", version, "fake_ok_kernel", "fake_ok", "1.4")
    registered = zoo_attention.reload_kernels()
    assert registered["fake_ok"].version == version
    assert "xla" in registered
    q = jnp.zeros((1, 4, 2, 8), jnp.float32)
    zoo_attention.dot_product_attention(q, q, q, implementation="fake_ok")
    assert resolution_log.last.as_dict()["version"] == version


def test_kernel_for_another_contract_major_is_refused_naming_both_versions(site):
    _install_fake_distribution(site, "fake-v2", "9.0.0", "fake_v2_kernel", "fake_v2", "2.0")
    registered = zoo_attention.reload_kernels()
    assert "fake_v2" not in registered
    (refused,) = [r for r in zoo_attention.refused_kernels() if r.name == "fake_v2"]
    assert "2.0" in refused.reason and zoo_attention.CONTRACT_VERSION in refused.reason
    with pytest.raises(ValueError, match="refused"):
        zoo_attention.get_kernel("fake_v2")


def test_direct_registration_checks_type_contract_and_duplicates():
    class Direct(AttentionKernel):
        name = "direct_test"

        def check(self, spec):
            return None

        def __call__(self, q, k, v, ids, spec):
            raise NotImplementedError

    class Future(Direct):
        name = "future_test"
        contract_version = "2.1"

    try:
        zoo_attention.register_kernel(Direct())
        with pytest.raises(KernelRegistrationError, match="already registered"):
            zoo_attention.register_kernel(Direct())
        with pytest.raises(KernelRegistrationError, match=r"2\.1"):
            zoo_attention.register_kernel(Future())
        with pytest.raises(KernelRegistrationError, match="AttentionKernel"):
            zoo_attention.register_kernel(object())  # type: ignore[arg-type]
    finally:
        zoo_attention.unregister_kernel("direct_test")


def test_a_kernel_that_tiles_sequences_runs_the_shared_cases_at_lengths_it_serves():
    from zoo_attention._xla import KERNEL as XLA
    from zoo_attention.testing import CASES, named_scope_failures, run_case

    seen: list[tuple[int, int]] = []

    class Tiled(AttentionKernel):
        name = "tiled_test"
        sequence_tile = 32

        def check(self, spec):
            if spec.q_len % 32 or spec.kv_len % 32:
                return "lengths must be multiples of 32"
            return None

        def __call__(self, q, k, v, ids, spec):
            seen.append((spec.q_len, spec.kv_len))
            return XLA(q, k, v, ids, spec)

    case = next(c for c in CASES if c.q_len % 32 and c.kv_len % 32 and c.q_len != c.kv_len)
    zoo_attention.register_kernel(Tiled())
    try:
        assert run_case("tiled_test", case) == []
        assert named_scope_failures("tiled_test") == []
    finally:
        zoo_attention.unregister_kernel("tiled_test")
    (t, s), t0, s0 = seen[0], case.q_len, case.kv_len
    assert t % 32 == 0 and s % 32 == 0 and t >= t0 and s >= s0
    assert (t > s) == (t0 > s0) and abs(t - s) >= abs(t0 - s0)  # the same kind of case
    assert seen[-1] == (32, 32)
