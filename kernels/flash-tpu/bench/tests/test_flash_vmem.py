"""flash_vmem's bisection against a brute-force scan, its reading of compile errors, its rows."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from flash_vmem import Case, _row, smallest_accepted
from flash_vmem_worker import is_vmem_refusal, refused_by

# Abridged from real libtpu refusals (v5e compile-only, zoo_flash_tpu 0.3.0, jax 0.10).
FORWARD_REFUSAL = (
    "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:\nRan out of memory in memory space "
    "vmem while allocating on stack for %zoo_flash_tpu_forward.1 = (bf16[1,8192,2048]{2,1,0:"
    'T(8,128)(2,1)S(1)}, f32[1,16,1,8192]{3,2,1,0:T(1,128)}) custom-call(...), custom_call_target="'
    'tpu_custom_call". Scoped allocation with size 7.00M and limit 2.00M exceeded scoped vmem '
    "limit by 5.0M."
)
DQ_REFUSAL = (
    "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:\nRan out of memory in memory space "
    "vmem while allocating on stack for %transpose_jvp_zoo_flash_tpu_backward_dq__.1 = "
    "bf16[1,8192,2048]{2,1,0:T(8,128)(2,1)S(1)} custom-call(...). Scoped allocation with size "
    "64.46M and limit 64.00M exceeded scoped vmem limit by 468.0K."
)


def _scan(accepts: Callable[[int], bool], top: int) -> int | None:
    return next((n for n in range(1, top + 1) if accepts(n)), None)


@pytest.mark.parametrize("top", [1, 2, 7, 64, 128])
def test_bisection_finds_what_a_linear_scan_finds_from_any_start(top: int) -> None:
    for threshold in range(1, top + 3):  # top + 1, top + 2: refused everywhere
        accepts = lambda n, t=threshold: n >= t
        for start in sorted({1, top // 2 or 1, top - 1 or 1, top}):
            found, tried = smallest_accepted(accepts, start, top)
            assert found == _scan(accepts, top), (threshold, start)
            assert tried[0] == start and all(1 <= n <= top for n in tried)
            assert len(tried) <= math.ceil(math.log2(top)) + 2
            if found is not None:  # it compiled there and was refused 1 below (or found is 1)
                assert found in tried and (found == 1 or found - 1 in tried)


def test_an_error_that_is_not_a_refusal_propagates() -> None:
    def accepts(n: int) -> bool:
        if n < 10:
            raise RuntimeError("Mosaic failed to compile TPU kernel: unsupported layout")
        return True

    with pytest.raises(RuntimeError, match="unsupported layout"):
        smallest_accepted(accepts, start=64, top=128)
    with pytest.raises(ValueError, match="start"):
        smallest_accepted(lambda n: True, start=200, top=128)


def test_vmem_refusals_are_told_from_other_compile_errors() -> None:
    assert is_vmem_refusal(FORWARD_REFUSAL) and is_vmem_refusal(DQ_REFUSAL)
    assert refused_by(FORWARD_REFUSAL) == "forward"
    assert refused_by(DQ_REFUSAL) == "backward_dq"
    assert not is_vmem_refusal("INTERNAL: Mosaic failed to compile TPU kernel: bad tiling")
    # Out of HBM is not a VMEM limit the bisection may move.
    assert not is_vmem_refusal(
        "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm."
    )


def test_rows_show_the_ratio_errors_and_a_limit_never_accepted() -> None:
    whole = Case(8, False, (512, 1024, 512, 1024), None).request()
    sub = Case(8, True, (512, 1024, 512, 1024), 512).request()
    row = _row({**whole, "min_mib": 18, "top_mib": 128, "estimate_bytes": 24 * 2**20,
                "refused_below_by": "forward", "compile_s": 1.1})  # fmt: skip
    assert row == ["8", "fwd", "512×1024", "—", "whole block", "18", "24.0", "1.33", "fwd", "1.1"]
    row = _row({**sub, "min_mib": None, "top_mib": 128, "estimate_bytes": 12 * 2**20,
                "refused_below_by": None, "compile_s": None})  # fmt: skip
    assert row[1:5] == ["fwd+bwd", "512×1024", "512×1024", "512 keys"]
    assert row[5:] == ["over 128 (refused at every limit)", "12.0", "—", "—", "—"]
    assert _row({**sub, "error": "ValueError: refused"})[5] == "error: ValueError: refused"
