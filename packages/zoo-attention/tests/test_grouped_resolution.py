"""The grouped-matmul contract's registry and resolution: the same machinery as attention's
(explicit names, ZOO_GROUPED_MATMUL read like ZOO_ATTENTION, one fallback warning naming the
reason, the default order, the record), and its argument checks."""

import logging
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
from zoo_attention import grouped
from zoo_attention.grouped._ragged_dot import KERNEL as RAGGED_DOT
from zoo_attention.grouped._registry import GROUPED

ENV = grouped.ENV_VAR


class Picky(grouped.GroupedMatmulKernel):
    """Preferred on every platform, but serves only float32 (and says so)."""

    name = "picky_gmm"
    version = "0.9.0"
    priority = 50

    def __init__(self):
        self.calls = 0

    def check(self, spec):
        return None if spec.dtype == "float32" else f"dtype {spec.dtype} is not float32"

    def __call__(self, lhs, rhs, group_sizes, spec):
        self.calls += 1
        return RAGGED_DOT(lhs, rhs, group_sizes, spec)


@pytest.fixture
def picky(monkeypatch):
    """``picky_gmm`` registered, and no installed kernel but ``ragged_dot`` (so the default
    order is ``picky_gmm, ragged_dot`` whichever kernel packages this environment has)."""
    monkeypatch.delenv(ENV, raising=False)
    others = [k for name, k in grouped.kernels().items() if name != "ragged_dot"]
    for other in others:
        grouped.unregister_kernel(other.name)
    kernel = grouped.register_kernel(Picky(), replace=True)
    yield kernel
    grouped.unregister_kernel("picky_gmm")
    for other in others:
        grouped.register_kernel(other, replace=True)


def _args(dtype=jnp.float32, m=12):
    rng = np.random.default_rng()
    lhs = jnp.asarray(rng.standard_normal((m, 5)), dtype)
    rhs = jnp.asarray(rng.standard_normal((3, 5, 7)), dtype)
    return lhs, rhs, jnp.asarray([4, 0, 5], jnp.int32)


def test_default_order_prefers_the_higher_priority_kernel_and_records_its_kind(
    picky, resolution_log
):
    grouped.grouped_matmul(*_args())
    (res,) = resolution_log.grouped_matmul
    assert (res.kernel, res.version, res.source, res.skipped, res.kind) == (
        "picky_gmm",
        "0.9.0",
        "default",
        (),
        "grouped_matmul",
    )
    assert picky.calls == 1
    # Attention's views of the log are unchanged: no attention call was made.
    assert resolution_log.resolutions == [] and resolution_log.last is None
    assert resolution_log.last_of_kind("grouped_matmul") is res


def test_env_list_falls_back_to_the_next_with_one_warning_naming_the_reason(
    picky, monkeypatch, caplog, resolution_log
):
    monkeypatch.setenv(ENV, "picky_gmm,ragged_dot")
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        for _ in range(3):
            out = grouped.grouped_matmul(*_args(jnp.bfloat16))
    warnings = [r.getMessage() for r in caplog.records if "instead of" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "grouped matmul ragged_dot" in warnings[0] and "is not float32" in warnings[0]
    (res,) = resolution_log.grouped_matmul
    assert (res.kernel, res.source) == ("ragged_dot", "environment")
    assert res.fallback_reason == "picky_gmm: dtype bfloat16 is not float32"
    assert out.dtype == jnp.bfloat16 and picky.calls == 0


def test_the_kill_switch_and_explicit_names(picky, monkeypatch, resolution_log):
    args = _args()
    monkeypatch.setenv(ENV, "ragged_dot")
    got = grouped.grouped_matmul(*args)
    assert resolution_log.grouped_matmul[-1].source == "environment" and picky.calls == 0
    monkeypatch.setenv(ENV, "picky_gmm")  # the only entry cannot serve: an error with its reason
    with pytest.raises(grouped.KernelUnavailableError, match="is not float32"):
        grouped.grouped_matmul(*_args(jnp.bfloat16))
    monkeypatch.setenv(ENV, "pciky_gmm")  # a typo names nothing installed
    with pytest.raises(ValueError, match=r"names no installed kernel; known kernels: .*ragged_dot"):
        grouped.grouped_matmul(*args)
    monkeypatch.delenv(ENV)
    with pytest.raises(grouped.KernelUnavailableError, match="grouped matmul kernel picky_gmm"):
        grouped.grouped_matmul(*_args(jnp.bfloat16), implementation="picky_gmm")
    want = grouped.grouped_matmul(*args, implementation="picky_gmm")
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match=r"unknown grouped matmul implementation 'nope'"):
        grouped.grouped_matmul(*args, implementation="nope")


def test_an_entry_not_installed_is_passed_over(monkeypatch, caplog, resolution_log):
    monkeypatch.setenv(ENV, "gmm_nope,ragged_dot")
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        grouped.grouped_matmul(*_args())
    (res,) = resolution_log.grouped_matmul
    assert res.kernel == "ragged_dot" and "not installed" in res.skipped[0][1]
    assert any("gmm_nope" in r.getMessage() for r in caplog.records)


def test_ragged_dot_is_every_platforms_last_resort():
    for platform in ("cpu", "gpu", "tpu"):
        assert grouped.default_order(platform)[-1].name == "ragged_dot"
    assert grouped.get_kernel("ragged_dot").contract_version == (
        grouped.GROUPED_MATMUL_CONTRACT_VERSION
    )


def test_registration_checks_the_kind_and_the_contract_major():
    class Future(Picky):
        name = "future_gmm"
        contract_version = "2.0"

    with pytest.raises(
        zoo_attention.KernelRegistrationError, match=r"grouped matmul contract 2\.0"
    ):
        grouped.register_kernel(Future())
    with pytest.raises(zoo_attention.KernelRegistrationError, match="GroupedMatmulKernel"):
        grouped.register_kernel(RAGGED_DOT.__class__.__mro__[-2]())  # type: ignore[abstract]
    # One registry per kind: an attention kernel is no grouped-matmul kernel.
    with pytest.raises(zoo_attention.KernelRegistrationError, match="GroupedMatmulKernel"):
        grouped.register_kernel(zoo_attention.get_kernel("xla"))  # type: ignore[arg-type]


def _fake_distribution(root, module: str, source: str, entry: str) -> None:
    """fake-gmm 2.3.4 installed under ``root``: ``module`` (its ``source``) and the
    grouped-matmul entry point ``entry`` (``"name = module:attribute"``)."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / "fake_gmm-2.3.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-gmm\nVersion: 2.3.4\n")
    (info / "entry_points.txt").write_text(f"[{grouped.ENTRY_POINT_GROUP}]\n{entry}\n")


def test_an_entry_point_kernel_gets_its_distribution_version(tmp_path, monkeypatch):
    source = """
        from zoo_attention.grouped._ragged_dot import RaggedDotKernel

        class Fake(RaggedDotKernel):
            name = "fake_gmm"

        KERNEL = Fake()
    """
    _fake_distribution(tmp_path, "fake_gmm_kernel", source, "fake_gmm = fake_gmm_kernel:KERNEL")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert grouped.reload_kernels()["fake_gmm"].version == "2.3.4"
        assert "fake_gmm" not in zoo_attention.kernels()  # the attention registry is apart
    finally:
        monkeypatch.undo()
        sys.modules.pop("fake_gmm_kernel", None)
        grouped.reload_kernels()


def test_a_package_that_provides_kernels_as_it_is_imported_loads(tmp_path, monkeypatch):
    # zoo-layers provides `tiled` when imported, and its entry point imports it while the
    # registry loads: the registry must take that call from inside its own loading.
    source = """
        from zoo_attention import grouped
        from zoo_attention.grouped._ragged_dot import RaggedDotKernel

        class Listed(RaggedDotKernel):
            name = "fake_listed"

        class Provided(RaggedDotKernel):
            name = "fake_provided"

        KERNEL, PROVIDED = Listed(), Provided()
        grouped.provide_kernel("fake_provided", "fake_gmm_provider:PROVIDED", "fake-gmm")
    """
    _fake_distribution(
        tmp_path, "fake_gmm_provider", source, "fake_listed = fake_gmm_provider:KERNEL"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded: dict = {}
    loading = threading.Thread(target=lambda: loaded.update(grouped.reload_kernels()), daemon=True)
    loading.start()
    loading.join(timeout=60)
    monkeypatch.undo()
    # A registry stuck in its loading holds its lock for good: nothing after can use it.
    assert not loading.is_alive(), "loading the kernels never returned"
    sys.modules.pop("fake_gmm_provider", None)
    GROUPED._provided.pop("fake_provided", None)  # provided for good otherwise
    grouped.reload_kernels()
    assert {"fake_listed", "fake_provided"} <= set(loaded)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (((4, 3), (2, 4, 5), (2,)), r"lhs \[M, K\] and rhs \[G, K, N\].*\(4, 3\).*\(2, 4, 5\)"),
        (((4, 3), (2, 3, 5), (3,)), r"`group_sizes` must be integers \[2\]"),
    ],
)
def test_bad_arguments_name_the_argument_and_the_shapes(args, match):
    lhs, rhs, sizes = (jnp.zeros(s, jnp.int32 if len(s) == 1 else jnp.float32) for s in args)
    with pytest.raises(ValueError, match=match):
        grouped.grouped_matmul(lhs, rhs, sizes)


def test_the_call_runs_in_its_named_scope_under_jit(resolution_log):
    lhs, rhs, sizes = _args()
    text = (
        jax.jit(lambda a: grouped.grouped_matmul(a, rhs, sizes)).lower(lhs).as_text(debug_info=True)
    )
    res = resolution_log.grouped_matmul[-1]
    assert grouped.scope_name(res.kernel, res.version) in text
