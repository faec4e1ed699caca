"""What a compiled program's peak is made of (``zoo_train.aot.read_dump``), read from XLA's
buffer assignment: against XLA's own ``memory_analysis()`` on a CPU compile, and against a
hand-written dump whose peak is worked out by hand."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import pytest

from zoo_train.aot import dump_options, read_dump
from zoo_train.aot._hbm import from_oom

ROWS, WIDTH, HIDDEN = 256, 512, 4096


def _step(x: jax.Array, w: jax.Array) -> jax.Array:
    with jax.named_scope("wide"):
        # [ROWS, HIDDEN] float32, read by two matmuls after a barrier: materialized.
        h = jax.lax.optimization_barrier(jnp.tanh(x @ w))
    with jax.named_scope("narrow"):
        return (h @ w.T).sum(axis=1) + (h @ w.T[:, :1])[:, 0]


@pytest.fixture(scope="module")
def cpu_compile(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    directory = tmp_path_factory.mktemp("dump")
    x = jax.ShapeDtypeStruct((ROWS, WIDTH), jnp.float32)
    w = jax.ShapeDtypeStruct((WIDTH, HIDDEN), jnp.float32)
    compiled = jax.jit(_step).lower(x, w).compile(dump_options(directory))
    return compiled, read_dump(directory, ["x", "w"])


def test_the_peak_adds_up_to_xlas_own(cpu_compile):
    compiled, peak = cpu_compile
    memory = compiled.memory_analysis()
    assert peak is not None
    # Here everything XLA allocates is live at once when both matmuls read the hidden array.
    # (XLA:CPU's own `peak_memory_in_bytes` counts only the arguments and outputs; on a TPU it
    # is the whole peak, which `zoo compile`'s tests compare with.)
    # The output is live at the peak in a buffer of its own on jax 0.12's XLA, inside the
    # temporaries' on jax 0.10's: either way its bytes are XLA's.
    assert peak.output_bytes in (0, memory.output_size_in_bytes)
    assert peak.peak_bytes == (
        memory.argument_size_in_bytes + memory.temp_size_in_bytes + peak.output_bytes
    )
    assert peak.argument_bytes == memory.argument_size_in_bytes == 4 * WIDTH * (ROWS + HIDDEN)
    assert peak.peak_bytes == sum(b.bytes for b in peak.buffers)
    assert peak.peak_bytes == peak.argument_bytes + peak.output_bytes + peak.temporary_bytes


def test_buffers_are_named_by_their_scope_and_arguments_by_path(cpu_compile):
    _, peak = cpu_compile
    assert {b.name: b.bytes for b in peak.buffers if b.kind == "argument"} == {
        "x": 4 * ROWS * WIDTH,
        "w": 4 * WIDTH * HIDDEN,
    }
    (hidden,) = [b for b in peak.largest(10, "temporary") if b.bytes == 4 * ROWS * HIDDEN]
    assert hidden.shape == f"f32[{ROWS},{HIDDEN}]"
    assert hidden.name.startswith("wide/"), hidden.name
    assert peak.argument_parts() == {"w": 4 * WIDTH * HIDDEN, "x": 4 * ROWS * WIDTH}


# A program of two parameters (one an argument XLA names `arrays[1]`), a loop whose state is
# one buffer under two names, and a value in another memory (color 1) that HBM does not hold.
BUFFERS = """\
BufferAssignment:
allocation 0: size 1000, parameter 0, shape |f32[250]| at ShapeIndex {}:
 value: <1 p0 @0> (size=1000,offset=0): f32[250]{0}
allocation 1: size 400, parameter 1, shape |f32[100]| at ShapeIndex {}:
 value: <2 p1 @0> (size=400,offset=0): f32[100]{0}
allocation 2: size 96, maybe-live-out:
 value: <3 out @0> (size=96,offset=0): f32[24]{0}
allocation 3: size 5000, preallocated-temp:
 value: <4 big @0> (size=3000,offset=0): f32[750]{0}
 value: <5 loop{1} @0> (size=2000,offset=3000): f32[500]{0}
 value: <6 body.param{1} (phi) @0> (size=2000,offset=3000): f32[500]{0}
 value: <7 late @0> (size=3000,offset=0): f32[750]{0}
allocation 4: size 8000, color 1, preallocated-temp:
 value: <8 fast @1> (size=8000,offset=0): f32[2000]{0}
"""
LIVE = """\
HloLiveRange (max 9):
  InstructionSequence:
    0:p0
  BufferLiveRange:
    p0{}:0-9
    p1{}:0-9
    big{}:1-3
    loop{1}:2-4
    body.param{1}:3-6
    late{}:6-7
    fast{}:0-9
    out{}:8-9
  Live ranges at 3 (peak):
"""
HLO = """\
HloModule jit_step

body (body.param: (s32[], f32[500])) -> (s32[], f32[500]) {
  %body.param = (s32[]{:T(128)}, f32[500]{0}) parameter(0)
}

ENTRY main {
  %p0 = f32[250]{0} parameter(0), metadata={op_name="arrays[0]"}
  %p1 = f32[100]{0} parameter(1), metadata={op_name="arrays[1]"}
  %big = f32[750]{0} fusion(%p0), kind=kLoop, metadata={op_name="jit(step)/jvp(head)/dot_general"}
  %loop = (s32[]{:T(128)}, /*index=1*/f32[500]{0}) while(%t), condition=%cond, body=%body, metadata={op_name="jit(step)/jvp(layers)/while"}
  %late = f32[750]{0} fusion(%p1), kind=kLoop, metadata={op_name="jit(step)/optimizer/add"}
  %out = f32[24]{0} fusion(%late), kind=kLoop
}
"""


def test_a_written_dump_by_hand(tmp_path: pathlib.Path):
    prefix = tmp_path / "module_0001.jit_step.after_optimizations"
    (tmp_path / f"{prefix.name}-buffer-assignment.txt").write_text(BUFFERS)
    (tmp_path / f"{prefix.name}-live-range.txt").write_text(LIVE)
    (tmp_path / f"{prefix.name}.txt").write_text(HLO)
    peak = read_dump(tmp_path, ["batch['ids']", "state.params.w"])
    # Time 3: both arguments, `big` and the loop's buffer (once, though two values hold it);
    # the color-1 buffer is in another memory. Time 6 holds `late` (as large as `big`) too, but
    # at time 3 the loop state was already live: 1000 + 400 + 3000 + 2000 = 6400 both times,
    # and the first moment is the peak.
    assert peak is not None
    assert (peak.peak_bytes, peak.argument_bytes, peak.temporary_bytes) == (6400, 1400, 5000)
    assert [(b.name, b.bytes) for b in peak.buffers] == [
        ("jvp(head)/dot_general", 3000),
        ("jvp(layers)/while", 2000),
        ("batch['ids']", 1000),
        ("state.params.w", 400),
    ]
    assert peak.argument_parts() == {"batch": 1000, "state.params": 400}
    assert peak.as_dict()["largest_temporaries"][0]["instruction"] == "big{}"


def test_no_dump_is_no_breakdown(tmp_path: pathlib.Path):
    assert read_dump(tmp_path) is None


def test_xlas_out_of_memory_figure_is_the_whole_peak_arguments_included():
    # XLA's buffer assignment for llama-3.2-1b on v5e:2x2 at 32 rows: 3.45 GiB of arguments and
    # 51.67 GiB of temporaries live at a peak of 55.13 GiB, which the error calls "temporaries".
    error = RuntimeError(
        "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
        "temporaries (55.13G) exceeds available HBM (15.75G)."
    )
    arguments = int(3.45 * 2**30)
    memory = from_oom(error, arguments)
    assert memory is not None and memory.from_error and not memory.fits
    assert memory.peak_bytes == int(55.13 * 2**30)
    assert memory.temp_bytes == memory.peak_bytes - arguments
    assert memory.hbm_bytes == int(15.75 * 2**30)
