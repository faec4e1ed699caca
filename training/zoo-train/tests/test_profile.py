"""`--profile`: a trace of chosen steps, read back by `zoo profile`: kernel rows, categories that
add up to the loop's own clock, the same numbers as without it, comparisons."""

import importlib.metadata
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny_lm import loaders, make_model

import zoo_train
from zoo_attention import cross_entropy, grouped
from zoo_attention.cross_entropy import linear_cross_entropy_loss
from zoo_train import OptimizerConfig, TrainConfig
from zoo_train.cli import main
from zoo_train.profile import compare, parse_hlo, summarize
from zoo_train.profile._summary import BETWEEN_OPS, HOST, IDLE, PROGRAM, _attribute, _Classifier
from zoo_train.profile._trace import Span

WINDOW = (3, 6)


def _config(profile):
    return TrainConfig(
        steps=8,
        batch_size=256,  # steps of ~10 ms: a scheduling delay under load stays a small share
        optimizer=OptimizerConfig(lr=3e-3, warmup_steps=2),
        log_every=1,
        eval_every=0,
        checkpoint_every=8,
        progress=False,
        plot=False,
        profile=profile,
    )


def _run(out, profile):
    train, _ = loaders(0)
    zoo_train.train(make_model(0), train, config=_config(profile), out=out)
    return zoo_train.read_metrics(out / zoo_train.METRICS_FILE)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    profiled = tmp_path_factory.mktemp("profiled")
    plain = tmp_path_factory.mktemp("plain")
    return profiled, _run(profiled, WINDOW), _run(plain, None)


def test_capturing_changes_no_number(runs):
    _, profiled, plain = runs
    losses = lambda records: [
        (r["step"], r["loss"], r["grad_norm"]) for r in records if "loss" in r
    ]
    assert losses(profiled) == losses(plain) and len(losses(plain)) == 8


def test_the_attention_row_names_the_resolved_kernel_and_its_version(runs):
    out, records, _ = runs
    resolved = records[0]["attention"][0]["kernel"]
    (entry,) = importlib.metadata.entry_points(group="zoo.attention_kernels", name=resolved)
    version = entry.dist.version  # the installed distribution's own metadata
    summary = summarize(out)
    attention = [c for c in summary.categories if c.startswith("attention")]
    assert attention == [f"attention: {resolved} {version}"]
    assert summary.categories[attention[0]] > 0 and summary.categories["matmul"] > 0
    assert summary.steps == WINDOW[1] - WINDOW[0] + 1


def test_the_categories_add_up_to_the_loops_own_clock(runs):
    summary = summarize(runs[0])
    total = sum(summary.categories.values())
    assert total == pytest.approx(summary.step_ms, rel=1e-9)
    # The trace runs from the first step marker to the last operation's end; the loop's clock
    # from just before the first dispatch to the return of the wait for the last step.
    assert total == pytest.approx(summary.meta["wall_ms_per_step"], rel=0.10)
    assert {op["category"] for op in summary.top_ops} <= set(summary.categories)


def test_cli_table_json_and_comparison(runs, capsys):
    out = runs[0]
    assert main(["profile", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["categories"] == summarize(out).categories
    assert main(["profile", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "attention:" in shown and "top operations" in shown
    # Piped (as here), every name is printed whole, however long: no terminal width to fit.
    for op in summarize(out).top_ops:
        assert op["name"] in shown, op["name"]
    for category in summarize(out).categories:
        assert category in shown, category
    assert main(["profile", "--compare", str(out), str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["category"] == "step" and all(r["change_ms"] == 0 for r in rows)


def test_compare_reports_each_category_change():
    a = zoo_train.profile.Summary("a", 2, 10.0, {"attention: k 1.0": 4.0, "matmul": 6.0}, [], {})
    b = zoo_train.profile.Summary("b", 2, 9.0, {"attention: k 2.0": 2.0, "matmul": 7.0}, [], {})
    rows = {r["category"]: r for r in compare(a, b)["rows"]}
    assert rows["step"]["change_ms"] == pytest.approx(-1.0)
    assert rows["attention (all kernels)"]["change_pct"] == pytest.approx(-50.0)
    assert (
        rows["attention: k 1.0"]["after_ms"] == 0 and rows["attention: k 2.0"]["change_pct"] is None
    )
    assert rows["matmul"]["change_pct"] == pytest.approx(100 / 6)


def test_compare_totals_grouped_matmul_kernels_apart_from_attention():
    a = zoo_train.profile.Summary(
        "a",
        2,
        10.0,
        {"attention: k 1.0": 4.0, "grouped matmul: tiled 0.4": 3.0, "matmul": 3.0},
        [],
        {},
    )
    b = zoo_train.profile.Summary(
        "b",
        2,
        8.0,
        {"attention: k 1.0": 4.0, "grouped matmul: megablox 0.1": 1.0, "matmul": 3.0},
        [],
        {},
    )
    rows = compare(a, b)["rows"]
    assert [r["category"] for r in rows] == [
        "step",
        "attention (all kernels)",
        "attention: k 1.0",
        "grouped matmul (all kernels)",
        "grouped matmul: megablox 0.1",
        "grouped matmul: tiled 0.4",
        "matmul",
    ]
    assert rows[3]["change_pct"] == pytest.approx(-200 / 3)


def test_hlo_names_a_megablox_call_by_kind_kernel_and_version(monkeypatch):
    monkeypatch.setenv("ZOO_MEGABLOX_INTERPRET", "1")  # the real kernel, off TPU
    rng = np.random.default_rng()
    lhs = jnp.asarray(rng.normal(size=(64, 32)), jnp.float32)
    rhs = jnp.asarray(rng.normal(size=(4, 32, 48)), jnp.float32)
    sizes = jnp.asarray([10, 0, 20, 5], jnp.int32)
    fn = lambda a, b: jnp.sin(grouped.grouped_matmul(a, b, sizes, implementation="megablox")).sum()
    program = parse_hlo(jax.jit(fn).lower(lhs, rhs).compile().as_text())
    name = f"megablox {grouped.get_kernel('megablox').version}"
    in_kernel = [
        n for n in program.instructions if program.kernel_of(n) == ("grouped matmul", name)
    ]
    assert in_kernel and any(program.is_matmul(n) for n in in_kernel)
    classify = _Classifier({program.module: program}, {})
    assert (
        classify(Span(in_kernel[0], 0.0, 1.0, module=program.module)) == f"grouped matmul: {name}"
    )


def test_hlo_names_the_fused_cross_entropy_by_kind_kernel_and_version():
    rng = np.random.default_rng(0)
    hidden = jnp.asarray(rng.normal(size=(2, 8, 16)), jnp.float32)
    head = jnp.asarray(rng.normal(size=(16, 40)), jnp.float32)
    targets = jnp.asarray(rng.integers(0, 40, (2, 8)), jnp.int32)

    def fn(h, w):
        return linear_cross_entropy_loss(h, w, targets, implementation="fused_xla")[0]

    program = parse_hlo(jax.jit(jax.grad(fn, (0, 1))).lower(hidden, head).compile().as_text())
    name = f"fused_xla {cross_entropy.get_kernel('fused_xla').version}"
    in_kernel = [n for n in program.instructions if program.kernel_of(n) == ("cross entropy", name)]
    assert any(program.is_matmul(n) for n in in_kernel)  # the tiles' products with the head
    classify = _Classifier({program.module: program}, {})
    matmul = next(n for n in in_kernel if program.is_matmul(n))
    assert classify(Span(matmul, 0.0, 1.0, module=program.module)) == f"cross entropy: {name}"


def test_profile_without_a_trace_is_one_sentence(tmp_path, capsys):
    assert main(["profile", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "No profiler trace" in err and "Traceback" not in err


def test_time_is_shared_between_overlapping_operations_like_a_brute_force_count():
    rng = np.random.default_rng()
    spans = []
    for i in range(40):
        start = float(rng.integers(0, 200))
        spans.append((Span(f"op{i}", start, float(rng.integers(1, 30))), f"c{i % 3}"))
    for kind, category in ((HOST, "checkpoint"), (PROGRAM, BETWEEN_OPS)):
        for _ in range(3):
            start = float(rng.integers(0, 200))
            spans.append((Span(kind, start, float(rng.integers(5, 60)), module=kind), category))
    start, end = 10.0, 190.0
    by_category, by_op = _attribute(spans, start, end)
    expect: dict[str, float] = {}
    ops = 0.0
    for t in np.arange(start, end):  # every unit of time: shared by the first layer covering it
        for layer in ("", HOST, PROGRAM):
            covering = [c for s, c in spans if s.module == layer and s.start <= t < s.end]
            if covering:
                break
        ended = [(s.end, i) for i, (s, _) in enumerate(spans) if s.module == "" and s.end <= t]
        if layer == PROGRAM and covering and ended:  # the last operation to end runs on
            covering, layer = [spans[max(ended)[1]][1]], ""
        for c in covering:
            expect[c] = expect.get(c, 0.0) + 1 / len(covering)
        if not covering:
            expect[IDLE] = expect.get(IDLE, 0.0) + 1
        ops += bool(covering) and layer == ""
    assert by_category.keys() == expect.keys()
    for c in expect:
        assert by_category[c] == pytest.approx(expect[c])
    assert sum(by_op.values()) == pytest.approx(ops)


# A Pallas call as XLA prints it for TPU: its frontend attributes hold JSON with line breaks
# (splash attention's block sizes), so the op_name with the kernel's scope is on a later line.
MULTILINE_CUSTOM_CALL = """HloModule jit_loss, entry_computation_layout={(bf16[4,256,128]{2,1,0})->bf16[4,256,128]{2,1,0}}

ENTRY %main.1 (p0: bf16[4,256,128]) -> bf16[4,256,128] {
  %p0 = bf16[4,256,128]{2,1,0} parameter(0)
  %splash_mha_fwd.1 = (f32[512,128]{1,0:T(8,128)}, bf16[4,256,128]{2,1,0}) custom-call(%p0), custom_call_target="tpu_custom_call", frontend_attributes={kernel_metadata={
"xprof_metadata":"{\\"block_q\\": 512, \\"block_kv\\": 512}"
}}, metadata={op_name="jit(loss)/zoo_attention.splash-0.1.0/shard_map/pallas_call" stack_frame_id=12}, backend_config={"custom_call_config":{"body":"TUzv"}}
  ROOT %get-tuple-element.2 = bf16[4,256,128]{2,1,0} get-tuple-element(%splash_mha_fwd.1), index=1, metadata={op_name="jit(loss)/get"}
}
"""


def test_an_instruction_over_several_lines_is_read_whole():
    program = parse_hlo(MULTILINE_CUSTOM_CALL)
    assert program.computations["main.1"] == ["p0", "splash_mha_fwd.1", "get-tuple-element.2"]
    assert program.kernel("splash_mha_fwd.1") == "splash 0.1.0"
    assert program.instructions["splash_mha_fwd.1"].target == "tpu_custom_call"
    assert program.kernel("get-tuple-element.2") is None


def test_hlo_names_the_kernel_scope_and_the_matmuls():
    def f(x, w):
        with jax.named_scope("zoo_attention.fake-1.2.3"):
            y = jnp.tanh(x @ w)
        return jnp.sin(y).sum()

    x = jnp.asarray(np.random.default_rng().normal(size=(16, 16)), jnp.float32)
    program = parse_hlo(jax.jit(f).lower(x, x).compile().as_text())
    in_kernel = [n for n in program.instructions if program.kernel(n) == "fake 1.2.3"]
    assert in_kernel and any(program.is_matmul(n) for n in in_kernel)
    outside = [n for n, i in program.instructions.items() if "sin" in i.op_name]
    assert outside and all(program.kernel(n) is None for n in outside)
    assert not any(program.is_matmul(n) for n in outside)
