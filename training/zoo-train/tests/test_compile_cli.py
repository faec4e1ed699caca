"""``zoo compile``: the real train step compiled for a TPU topology with libtpu's compile-only
devices (run in ``.venv-tpu``, which ``make install`` creates; ``$ZOO_TPU_PYTHON`` overrides)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import zoo_models
from zoo_train.aot import StepMemory, StepReport, StepSetup, max_batch

REPO = pathlib.Path(__file__).resolve().parents[3]
ZOO = "import sys; from zoo_train.cli import main; sys.exit(main())"
KEYS = {"topology", "devices", "mesh", "per_device", "fits", "kernels", "compile_s"}
PER_DEVICE = {"argument_bytes", "output_bytes", "temp_bytes", "peak_bytes", "hbm_bytes"}


def _tpu_python() -> str:
    path = pathlib.Path(os.environ.get("ZOO_TPU_PYTHON", REPO / ".venv-tpu" / "bin" / "python"))
    if not path.exists():
        pytest.fail(
            f"no TPU compile environment at {path}: run `make install` (it creates .venv-tpu) or "
            "point ZOO_TPU_PYTHON at a python with libtpu and zoo-train."
        )
    return str(path)


def _tpu_env() -> dict[str, str]:
    """This environment without zoo's settings and XLA's flags."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "XLA_FLAGS"))}


def _zoo(python: str, *args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = _tpu_env()
    return subprocess.run(
        [python, "-c", ZOO, "compile", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _usage_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("zoo compile:")]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].endswith("."), proc.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]


QWEN3_5_LINEAR = zoo_models.get("qwen3.5-tiny").n_linear_layers

# llama-tiny widened so every per-device shard is a whole number of TPU tiles (128 lanes):
# the compiled argument bytes are then the logical bytes.
WIDE = [
    "--model", "llama-tiny", "--seq-len", "256", "--set", "model_config.d_model=512",
    "--set", "model_config.mlp_hidden=1024", "--set", "model_config.n_heads=4",
]  # fmt: skip
MOE_ARGS = [
    "--model", "mixtral-tiny", "--seq-len", "256", "--batch-size", "8", "--mesh",
    "fsdp=2,expert=2", "--set", "model_config.d_model=512",
    "--set", "model_config.mlp_hidden=1024", "--set", "model_config.n_heads=4",
]  # fmt: skip
RUNS = {
    "fit": [*WIDE, "--batch-size", "8"],
    # 2 x 4M x 1024 embedding and head in float32 with AdamW: 96 GiB over four devices.
    "no-fit": [
        "--model", "llama-tiny", "--batch-size", "16", "--set", "model_config.vocab_size=4000000",
        "--set", "model_config.d_model=1024", "--set", "model_config.n_heads=8",
    ],
    # Logits of 131072 tokens dominate (the unfused loss, see RUN_ENV): about 16 MiB a row per
    # device. With libtpu 0.0.42.1 (v5e:2x2) 972 rows fit and 976 do not; the search starts there, so
    # it compiles three sizes (972, twice that, 976) where a start at 640 took four (each
    # compile takes 15-25 s). Another libtpu only moves the answer and adds a compile or two.
    "max-batch": [
        "--model", "llama-tiny", "--seq-len", "128", "--set", "model_config.vocab_size=131072",
        "--batch-size", "972", "--max-batch",
    ],
    # What `zoo finetune` would run on a Hugging Face mixture of experts: LoRA adapters and
    # DPO against the base with the adapters off (the directory holds only config.json).
    "lora-dpo": [
        "--from-hf", "{tmp}/moe-hf", "--lora-rank", "8", "--objective", "dpo", "--seq-len",
        "256", "--batch-size", "8", "--mesh", "fsdp=2,expert=2",
    ],
    # libtpu's v4 lists one device per TensorCore, two a chip, which JAX's physical mesh
    # layout refuses ("megacore" mode): the mesh then takes the devices in order.
    "v4": ["--topology", "v4:2x2x1", "--model", "llama-tiny", "--batch-size", "8"],
    # A mixture of experts, widened like WIDE: experts split over `expert`, the rest over fsdp.
    # (megablox's own compile tests cover v6e: forward and backward, each generation.)
    "moe": MOE_ARGS,
    # Qwen3.5: gated DeltaNet layers through deltanet_tpu, heads split over `tensor`.
    "qwen3.5": [
        "--model", "qwen3.5-tiny", "--seq-len", "256", "--batch-size", "8",
        "--mesh", "fsdp=2,tensor=2",
    ],
}  # fmt: skip
#: What a run's process adds to the environment: the max-batch search compiles the unfused
#: loss, whose logits make the batch's size (the fused one fits many times the rows).
RUN_ENV = {"max-batch": {"ZOO_CROSS_ENTROPY": "logits"}}


MOE = zoo_models.get("mixtral-tiny").replace(d_model=512, mlp_hidden=1024, n_heads=4)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, dict]]:
    """The compiles, side by side (each is mostly one thread of XLA)."""
    tmp = tmp_path_factory.mktemp("compile")
    (tmp / "moe-hf").mkdir()
    (tmp / "moe-hf" / "config.json").write_text(json.dumps(zoo_models.to_hf_config(MOE)))
    env = _tpu_env()
    procs = {
        name: subprocess.Popen(
            [
                _tpu_python(),
                "-c",
                ZOO,
                "compile",
                *([] if "--topology" in args else ["--topology", "v5e:2x2"]),
                *(a.format(tmp=tmp) for a in args),
                "--json",
                str(tmp / f"{name}.json"),
            ],
            cwd=tmp,
            env={**env, **RUN_ENV.get(name, {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in RUNS.items()
        if name != "max-batch"  # its own fixture: it compiles three times, each slowly
    }
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        report = tmp / f"{name}.json"
        assert report.exists(), f"{name}: exit {proc.returncode}\n{stdout}\n{stderr[-3000:]}"
        out[name] = (proc.returncode, stdout, json.loads(report.read_text()))
    return out


def test_a_small_step_fits_and_reports_its_figures(runs):
    code, stdout, report = runs["fit"]
    assert code == 0, stdout
    assert set(report) >= KEYS and set(report["per_device"]) >= PER_DEVICE
    assert report["topology"] == "v5e:2x2" and report["devices"] == 4
    assert report["mesh"] == {"data": 1, "fsdp": 4, "tensor": 1}  # the default: all fully sharded
    assert report["fits"] is True
    device = report["per_device"]
    assert 0 < device["peak_bytes"] <= device["hbm_bytes"] < 17 * 2**30
    # Parameters and AdamW's two moments in float32, sharded four ways: each device holds a
    # quarter (replicated it would hold all of it), plus its rows of the batch.
    config = zoo_models.get("llama-tiny").replace(d_model=512, mlp_hidden=1024, n_heads=4)
    state = 3 * 4 * zoo_models.num_params(config)
    batch = 5 * 4 * 8 * 256 // 4  # five int32/float32 [8, 256] arrays, split over the rows
    assert state / 4 <= device["argument_bytes"] <= 1.05 * (state / 4 + batch)
    # The loss's kernel too, by its named scope (fused_xla, or a TPU plug-in ranked above it).
    kinds = [(k["kind"], k["kernel"]) for k in report["kernels"]]
    assert kinds[0] == ("attention", "flash_tpu") and [k for k, _ in kinds[1:]] == [
        "cross_entropy"
    ], kinds
    assert f"; cross entropy: {kinds[1][1]} " in stdout
    assert report["mosaic_calls"] >= 4  # forward, delta, dq, dk/dv
    # What the peak is made of, from XLA's buffer assignment: the buffers it lists in HBM (on a
    # step this small XLA's peak is mostly on-chip scratch it does not list), its arguments the
    # state's shards, its temporaries named by the scopes that made them.
    peak = report["peak"]
    assert device["argument_bytes"] <= peak["bytes"] <= device["peak_bytes"]
    assert peak["bytes"] == peak["argument_bytes"] + peak["output_bytes"] + peak["temporary_bytes"]
    assert abs(peak["argument_bytes"] - device["argument_bytes"]) <= 0.01 * device["argument_bytes"]
    parts = peak["argument_parts"]
    assert 4 * zoo_models.num_params(config) / 4 <= parts["state.params"] <= 1.05 * state / 12
    assert parts["state.opt_state"] >= 2 * parts["state.params"]
    names = [b["name"] for b in peak["largest_temporaries"]]
    assert any("attention" in n for n in names), names
    assert "largest temporaries at the peak" in stdout
    assert "fits" in stdout and "flash_tpu" in stdout


def test_a_topology_of_one_device_per_tensorcore_compiles(runs):
    code, _, report = runs["v4"]
    assert code == 0 and report["fits"], report
    assert report["devices"] == 8 and report["device_kind"] == "TPU v4"


def test_a_mixture_of_experts_splits_its_experts_over_the_expert_axis(runs):
    code, stdout, report = runs["moe"]
    assert code == 0, stdout
    assert report["mesh"] == {"data": 1, "fsdp": 2, "expert": 2, "tensor": 1}
    assert "expert=2" in stdout
    # The experts' weights and moments are split four ways (experts over `expert`, their width
    # over `fsdp`), everything else two ways (over `fsdp`); plus each device's rows.
    config = zoo_models.get("mixtral-tiny").replace(d_model=512, mlp_hidden=1024, n_heads=4)
    total = zoo_models.num_params(config)
    experts = len(config.moe_layers) * config.n_experts * 3 * config.d_model * config.expert_width
    state = 3 * 4 * (experts / 4 + (total - experts) / 2)
    batch = 5 * 4 * 8 * 256 // 4
    assert state <= report["per_device"]["argument_bytes"] <= 1.01 * (state + batch)
    assert report["fits"] is True and report["collectives"]["all-to-all"] == 0


def test_a_mixtral_step_compiles_with_megablox_on_a_mesh(runs):
    """The experts' grouped matmuls resolve to megablox (the TPU default with zoo-megablox
    installed) inside the layer's shard_map over `fsdp` x `expert`, and Mosaic compiles them,
    forward and backward, beside flash_tpu."""
    code, stdout, report = runs["moe"]
    assert code == 0, stdout
    assert report["topology"] == "v5e:2x2" and report["fits"] is True
    kernels = {(k["kind"], k["kernel"]) for k in report["kernels"] if k["kind"] != "cross_entropy"}
    assert kernels == {("attention", "flash_tpu"), ("grouped_matmul", "megablox")}, report
    # flash_tpu's four kernels, and for each of the experts' three grouped matmuls megablox's
    # gmm (forward, and lhs's gradient) and tgmm (rhs's gradient): 13 (the layers are scanned).
    assert report["mosaic_calls"] >= 4 + 3 * 3, report
    assert "grouped matmul: megablox " in stdout


def _lora_params(config: zoo_models.ModelConfig, rank: int) -> int:
    """Adapter parameters of LoRA on q, k, v and o of every layer: ``A [rank, in]`` and
    ``B [out, rank]`` per projection."""
    d, width = config.d_model, config.dim_per_head
    q, kv = config.n_heads * width, config.kv_heads * width
    per_layer = rank * ((d + q) + 2 * (d + kv) + (q + d))
    return config.n_layers * per_layer


def test_a_lora_preference_fine_tune_of_a_hugging_face_moe_compiles(runs):
    """The step `zoo finetune --lora-rank 8 --objective dpo` takes on that model: AdamW moments
    of the adapters alone, against those of every parameter."""
    code, stdout, report = runs["lora-dpo"]
    assert code == 0, stdout
    assert report["lora"]["rank"] == 8 and report["objective"] == "dpo"
    assert report["fits"] is True
    assert [k["kind"] for k in report["kernels"]] == [
        "attention", "grouped_matmul", "cross_entropy"
    ]  # fmt: skip
    assert [k["kernel"] for k in report["kernels"]][:2] == ["flash_tpu", "megablox"]
    total = zoo_models.num_params(MOE)
    experts = len(MOE.moe_layers) * MOE.n_experts * 3 * MOE.d_model * MOE.expert_width
    # Two float32 moments of every parameter: experts split four ways, the rest two ways.
    full = 2 * 4 * (experts / 4 + (total - experts) / 2)
    assert full <= report["optimizer_bytes_full_finetune"] <= 1.01 * full
    # Of the adapters alone: at most all of them on each device, at least a quarter.
    adapters = 2 * 4 * _lora_params(MOE, 8)
    assert adapters / 4 <= report["optimizer_bytes"] <= adapters + 4096
    assert "LoRA saves" in stdout and "dpo fine-tuning step" in stdout


def test_a_qwen3_5_step_runs_its_deltanet_layers_through_deltanet_tpu(runs):
    """The gated DeltaNet layers' recurrences resolve to deltanet_tpu (the TPU default with
    zoo-deltanet-tpu installed) and Mosaic compiles them under the contract's shard_map over
    the batch (fsdp) and the heads (tensor), beside flash_tpu for the attention layers."""
    code, stdout, report = runs["qwen3.5"]
    assert code == 0, stdout
    assert report["fits"] is True and report["mesh"] == {"data": 1, "fsdp": 2, "tensor": 2}
    kinds = [(k["kind"], k["kernel"]) for k in report["kernels"]]
    assert kinds[:2] == [("attention", "flash_tpu"), ("linear_attention", "deltanet_tpu")], kinds
    assert [k for k, _ in kinds[2:]] == ["cross_entropy"], kinds  # the loss's kernel last
    # flash_tpu's four kernels; deltanet_tpu's forward, and its backward's forward and backward.
    assert report["mosaic_calls"] >= 4 + 3, report
    assert "; linear attention: deltanet_tpu " in stdout
    assert f"; cross entropy: {kinds[2][1]} " in stdout


def test_a_step_built_not_to_fit_exits_3_with_figures(runs):
    code, stdout, report = runs["no-fit"]
    assert code == 3, stdout
    assert "does not fit" in stdout
    assert report["fits"] is False
    device = report["per_device"]
    assert device["peak_bytes"] > device["hbm_bytes"] > 0
    assert device["argument_bytes"] >= 3 * 4 * 2 * 4_000_000 * 1024 // 4
    # XLA's error names the memory it needs, arguments included; the buffer assignment it
    # wrote before failing says what was live at that peak (the gaps between buffers aside).
    assert device["peak_bytes"] == device["argument_bytes"] + device["temp_bytes"]
    live = report["peak"]
    assert device["hbm_bytes"] < live["bytes"] <= device["peak_bytes"]
    assert live["argument_bytes"] >= 3 * 4 * 2 * 4_000_000 * 1024 // 4
    assert "live at the peak" in stdout


@pytest.fixture(scope="module")
def max_batch_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict]:
    tmp = tmp_path_factory.mktemp("max-batch")
    proc = subprocess.run(
        [_tpu_python(), "-c", ZOO, "compile", "--topology", "v5e:2x2", *RUNS["max-batch"],
         "--json", str(tmp / "report.json")],
        cwd=tmp, env={**_tpu_env(), **RUN_ENV["max-batch"]}, capture_output=True, text=True,
        timeout=1200,
    )  # fmt: skip
    assert (tmp / "report.json").exists(), f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc.returncode, proc.stdout, json.loads((tmp / "report.json").read_text())


def _assert_a_search_report(code: int, stdout: str, report: dict) -> int:
    assert code == 0, stdout
    best = report["max_batch"]
    tried = {r["batch_size"]: r["fits"] for r in report["search"]}
    assert best > 0 and best % 4 == 0 and tried[best] is True
    assert tried.get(best + 4) is False  # the next multiple of the data shards was compiled
    assert all(fits == (b <= best) for b, fits in tried.items())
    assert report["batch_size"] == best and report["fits"] is True
    assert f"largest micro-batch that fits: {best}" in stdout
    return best


# The search as `zoo compile --max-batch` runs it, with a memory model in place of XLA's
# compiles (peak 1000 + 37 b bytes of 1000 + 37 * 1001): the command's search, messages and
# report; the compiles' own figures are the other runs'.
MEMORY_MODEL = """
import sys
import zoo_train.aot._train_step as step
from zoo_train.aot import StepMemory, StepReport

def compile_step(setup, b, on_compile=None):
    if on_compile is not None:
        on_compile(b)
    peak = 1000 + 37 * b
    return StepReport(b, StepMemory(1000, 1000, 1000, peak - 1000, peak, 1000 + 37 * 1001), 0.0,
                      [], 0)

step.compile_step = compile_step
from zoo_train.cli import main
sys.exit(main())
"""


def test_max_batch_on_the_command_line_searches_to_the_largest_that_fits(tmp_path):
    proc = subprocess.run(
        [_tpu_python(), "-c", MEMORY_MODEL, "compile", "--topology", "v5e:2x2", "--model",
         "llama-tiny", "--seq-len", "128", "--batch-size", "16", "--max-batch", "--json",
         str(tmp_path / "report.json")],
        cwd=tmp_path, env=_tpu_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    report = json.loads((tmp_path / "report.json").read_text())
    assert _assert_a_search_report(proc.returncode, proc.stdout, report) == 1000
    assert "zoo: compiling micro-batch 1004 ..." in proc.stderr  # said before each compile


# The search on XLA's compiles: the test above runs it on a memory model, the runs compile its step
@pytest.mark.full
def test_max_batch_finds_the_largest_batch_that_fits(max_batch_run):
    code, stdout, report = max_batch_run
    _assert_a_search_report(code, stdout, report)
    # The kill switch's kernel is the one the step compiled (RUN_ENV).
    assert ("cross_entropy", "logits") in [(k["kind"], k["kernel"]) for k in report["kernels"]]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--topology", "v9x:2x2"], ["Unknown TPU topology 'v9x:2x2'", "v5e:2x2"]),
        (["--topology", "v5e:3x7"], ["TPU topology 'v5e:3x7' is not one libtpu knows"]),
        (["--topology", "v5e:2x2", "--mesh", "data=3"], ["which does not divide 4"]),
        (["--topology", "v5e:2x2", "--mesh", "tensor=4"], ["2 key/value heads"]),
        (["--topology", "v5e:2x2", "--export-hf", "x"], ["takes no --export-hf"]),
        (
            ["--topology", "v5e:2x2", "--model", "qwen3.5-tiny", "--mesh", "fsdp=1,context=4"],
            [f"{QWEN3_5_LINEAR} gated DeltaNet layers", "use context=1"],
        ),
    ],
    ids=["unknown-generation", "unknown-shape", "mesh", "tensor", "export", "context-deltanet"],
)
def test_bad_topologies_and_meshes_are_usage_errors(args, needles, tmp_path: pathlib.Path):
    model = [] if "--model" in args else ["--model", "llama-tiny"]
    _usage_error(_zoo(_tpu_python(), *args, *model, cwd=tmp_path), *needles)


def test_a_sequence_no_host_could_make_exits_3_before_anything_is_built(tmp_path: pathlib.Path):
    # The hostile pass: --seq-len 1000000000000 was OOM-killed at 24 GB (a kernel's host tables).
    proc = _zoo(_tpu_python(), "--topology", "v5e:2x2", "--model", "llama-tiny",
                "--seq-len", "1000000000000", cwd=tmp_path)  # fmt: skip
    lines = [line for line in proc.stderr.splitlines() if line.startswith("zoo compile:")]
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr and "compiling" not in proc.stderr
    assert "A step's batch of 16 rows of 1,000,000,000,000 tokens needs at least" in lines[0]


def test_without_libtpu_it_says_how_to_get_it(tmp_path: pathlib.Path):
    # This environment (the main .venv) is CPU-only: no libtpu.
    proc = _zoo(sys.executable, "--topology", "v5e:2x2", cwd=tmp_path)
    _usage_error(proc, "needs libtpu", "pip install 'zoo-train[tpu]'")


PEAKS = {
    # A fixed state plus activations linear in the rows (what XLA's figures look like) ...
    "linear": lambda b: 1000 + 37 * b,
    # ... and a model the search's line does not describe.
    "quadratic": lambda b: 1000 + 3 * b + b * b // 9,
}


@pytest.mark.parametrize("peak", sorted(PEAKS))
@pytest.mark.parametrize(("start", "shards"), [(8, 4), (1024, 8), (4, 4), (96, 1)])
def test_max_batch_search_against_memory_models(monkeypatch, peak, start, shards):
    fit = int(np.random.default_rng().integers(40, 3000))
    hbm = PEAKS[peak](fit)  # `fit` rows fit exactly
    compiled: list[int] = []

    def fake(setup: StepSetup, b: int, on_compile=None) -> StepReport:
        compiled.append(b)
        used = PEAKS[peak](b)
        return StepReport(b, StepMemory(1000, 1000, 1000, used - 1000, used, hbm), 0.0, [], 0)

    monkeypatch.setattr("zoo_train.aot._train_step.compile_step", fake)
    best, reports = max_batch(None, start, shards=shards)  # type: ignore[arg-type]
    assert best == fit - fit % shards
    assert len(compiled) == len(set(compiled)) <= (10 if peak == "linear" else 18)
    assert {r.batch_size for r in reports} == set(compiled)


def test_max_batch_search_is_bounded_and_says_where_it_stands(monkeypatch):
    from zoo_train.aot import SearchStep, default_batch_limit

    assert default_batch_limit(128, 4) == 8192 and default_batch_limit(8192, 8) == 128
    hbm = 1 << 40  # a small model: everything fits
    compiled: list[int] = []

    def fake(setup: StepSetup, b: int, on_compile=None) -> StepReport:
        compiled.append(b)
        return StepReport(b, StepMemory(1, 1, 1, 1, 1000 + b, hbm), 0.0, [], 0)

    monkeypatch.setattr("zoo_train.aot._train_step.compile_step", fake)
    steps: list[SearchStep] = []
    best, _ = max_batch(None, 16, shards=4, limit=8192, on_step=steps.append)  # type: ignore[arg-type]
    assert best == 8192 and max(compiled) == 8192 and len(compiled) <= 6  # not past the limit
    assert all(s.hi is None and s.limit == 8192 for s in steps)
    # Bracketed, the search says about how many compiles remain, and keeps to it.
    fit = int(np.random.default_rng().integers(100, 5000))
    hbm = 1000 + fit

    def linear(setup: StepSetup, b: int, on_compile=None) -> StepReport:
        return StepReport(b, StepMemory(1, 1, 1, 1, 1000 + b, hbm), 0.0, [], 0)

    monkeypatch.setattr("zoo_train.aot._train_step.compile_step", linear)
    steps.clear()
    best, _ = max_batch(None, 16, shards=4, limit=8192, on_step=steps.append)  # type: ignore[arg-type]
    assert best == fit - fit % 4
    first = next(i for i, s in enumerate(steps) if s.left is not None)
    assert steps[first].lo < best + 4 <= steps[first].hi
    assert len(steps) - 1 - first <= steps[first].left + 1
    assert steps[-1].left in (0, None) or steps[-1].hi - steps[-1].lo <= 4


SIGTERM_DURING_COMPILE = """
import os, signal, sys, time
from zoo_train.aot import topology_devices
from zoo_train.cli._compile import _Watch
topology_devices("v5e:2x2")  # libtpu loaded: its failure handler would dump the stack
watch = _Watch()
watch.compiling(256)
watch.best = 32
with watch.one_line_on_sigterm():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)
"""


def test_sigterm_during_a_compile_is_one_line(tmp_path: pathlib.Path):
    env = _tpu_env()
    proc = subprocess.run(
        [_tpu_python(), "-c", SIGTERM_DURING_COMPILE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 143, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == (
        "zoo: stopped by SIGTERM while compiling micro-batch 256; the largest that fit so far: 32."
    )
    assert "stack trace" not in proc.stderr and "Traceback" not in proc.stderr
