"""The kernels in Pallas TPU interpret mode (TPU semantics, uninitialised memory poisoned with
NaNs) on a packed case with an initial state: the generic interpret mode the conformance suite
uses would not see a read of memory the kernel never wrote."""

from zoo_attention.linear.testing import CASES, run_case


def test_tpu_interpret_mode_on_packed_documents_and_an_initial_state(monkeypatch):
    monkeypatch.setenv("ZOO_DELTANET_TPU_INTERPRET", "tpu")
    (case,) = [c for c in CASES if c.name == "f32-t150-packed-initial-state"]
    failures = run_case("deltanet_tpu", case)
    assert not failures, "\n".join(failures)
