"""The lm-eval backend against lm-eval's own Hugging Face backend, on one tiny random
checkpoint and local tasks of every request type (float32 on both sides)."""

from __future__ import annotations

import json
import math
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("lm_eval", reason="lm-eval is zoo-train's `eval` extra")
pytest.importorskip("torch", reason="the reference backend runs on torch")

from zoo_train.cli import main
from zoo_train.eval_harness import (
    INSTALL,
    ZooLM,
    load_eval_model,
    plan_batches,
    require_lm_eval,
    run_tasks,
    task_metrics,
)
from zoo_train.eval_harness._results_table import COLUMNS
from zoo_train.parallel import make_mesh, make_rules
from zoo_train.testing import EVAL_TASKS, tiny_hf_llama, write_eval_tasks

TASKS = list(EVAL_TASKS.values())
CHOICE, TEXT, ANSWER = EVAL_TASKS.values()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The checkpoint, the tasks, and both backends' results (samples logged)."""
    from lm_eval.models.huggingface import HFLM

    root = tmp_path_factory.mktemp("eval")
    model_dir = tiny_hf_llama(root / "hf")
    tasks = write_eval_tasks(root / "tasks")
    hf = HFLM(pretrained=str(model_dir), dtype="float32", device="cpu", batch_size=4)
    mesh, rules = make_mesh(), make_rules(None)
    loaded = load_eval_model(str(model_dir), mesh=mesh, rules=rules)
    lm = ZooLM(
        loaded.model,
        loaded.tokenizer,
        mesh=mesh,
        rules=rules,
        batch_size=4,
        stop_tokens=loaded.stop_tokens,
    )
    run = lambda model: run_tasks(
        model, TASKS, include_path=str(tasks), log_samples=True, bootstrap_iters=0
    )
    return {
        "dir": model_dir,
        "tasks": tasks,
        "lm": lm,
        "hf_lm": hf,
        "loaded": loaded,
        "hf": run(hf),
        "zoo": run(lm),
        "run": run,
    }


def _by_doc(results, task):
    return {s["doc_id"]: s for s in results["samples"][task]}


def _scores(results, task):
    return {k: v for k, v in results["results"][task].items() if "," in k and "stderr" not in k}


def test_multiple_choice_equals_the_hf_backend(setup):
    hf, zoo = _by_doc(setup["hf"], CHOICE), _by_doc(setup["zoo"], CHOICE)
    assert hf.keys() == zoo.keys() and len(hf) == 12
    diffs = []
    for doc, sample in hf.items():
        for (ref_ll, ref_greedy), (ll, greedy) in zip(
            [r[0] for r in sample["resps"]], [r[0] for r in zoo[doc]["resps"]], strict=True
        ):
            diffs.append(abs(ref_ll - ll))
            assert greedy == ref_greedy
    assert max(diffs) < 1e-4, max(diffs)
    assert _scores(setup["zoo"], CHOICE) == _scores(setup["hf"], CHOICE)


def test_rolling_loglikelihood_equals_the_hf_backend(setup):
    # Several texts are longer than the model's 128 positions: more than one window each.
    assert (
        max(len(setup["lm"].tok_encode(s["doc"]["text"])) for s in setup["zoo"]["samples"][TEXT])
        > 2 * 128
    )
    ref, got = _scores(setup["hf"], TEXT), _scores(setup["zoo"], TEXT)
    assert (
        ref.keys()
        == got.keys()
        == {"word_perplexity,none", "byte_perplexity,none", "bits_per_byte,none"}
    )
    for key, value in ref.items():
        assert math.isclose(got[key], value, rel_tol=1e-5), (key, got[key], value)


def test_greedy_generation_equals_the_hf_backend(setup):
    hf, zoo = _by_doc(setup["hf"], ANSWER), _by_doc(setup["zoo"], ANSWER)
    texts = [zoo[d]["filtered_resps"][0] for d in sorted(zoo)]
    assert texts == [hf[d]["filtered_resps"][0] for d in sorted(hf)]
    assert len(set(texts)) > 1 and all("\n" not in t and "." not in t for t in texts)
    assert _scores(setup["zoo"], ANSWER) == _scores(setup["hf"], ANSWER)


def test_chat_prompts_equal_the_hf_backends(setup):
    got = {}
    for name, lm in (("hf", setup["hf_lm"]), ("zoo", setup["lm"])):
        got[name] = run_tasks(lm, [CHOICE, ANSWER], include_path=str(setup["tasks"]), limit=6,
                              apply_chat_template=True, system_instruction="be brief",
                              log_samples=True, bootstrap_iters=0)  # fmt: skip
    prompt = got["zoo"]["samples"][CHOICE][0]["arguments"][0][0]
    assert prompt.startswith("<|im_start|>system\nbe brief<|im_end|>")
    assert prompt.endswith("<|im_start|>assistant\n")
    for task in (CHOICE, ANSWER):
        ref, out = _by_doc(got["hf"], task), _by_doc(got["zoo"], task)
        for doc in ref:
            assert out[doc]["arguments"] == ref[doc]["arguments"]
            if task == ANSWER:
                assert out[doc]["filtered_resps"] == ref[doc]["filtered_resps"]
            else:
                a, b = (np.array(r[doc]["filtered_resps"], float) for r in (ref, out))
                np.testing.assert_allclose(b, a, atol=1e-4)


def test_exact_match_counts_the_same_answers(setup, tmp_path):
    # Half the answers are what greedy decoding gives: exact_match 0.5, not a trivial 0.
    samples = sorted(setup["hf"]["samples"][ANSWER], key=lambda s: s["doc_id"])
    rows = [{**s["doc"], "answer": s["filtered_resps"][0] if i % 2 else "no"}
            for i, s in enumerate(samples)]  # fmt: skip
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    yaml = (setup["tasks"] / f"{ANSWER}.yaml").read_text()
    data = json.dumps(str(setup["tasks"] / "data.jsonl"))
    yaml = yaml.replace(data, json.dumps(str(tmp_path / "data.jsonl")))
    (tmp_path / "echo.yaml").write_text(yaml.replace(f"task: {ANSWER}", "task: tiny_echo"))
    scores = [
        run_tasks(lm, ["tiny_echo"], include_path=str(tmp_path), bootstrap_iters=0)["results"]
        for lm in (setup["hf_lm"], setup["lm"])
    ]
    assert scores[0]["tiny_echo"]["exact_match,none"] == 0.5
    assert scores[1]["tiny_echo"]["exact_match,none"] == 0.5


def test_generation_honours_its_settings(setup):
    from types import SimpleNamespace

    lm = setup["lm"]
    contexts = [s["doc"]["question"] for s in setup["zoo"]["samples"][ANSWER]]

    def generate(**kwargs):
        requests = [SimpleNamespace(args=(c, {"until": [], **kwargs})) for c in contexts]
        return lm.generate_until(requests)

    greedy = generate(max_gen_toks=8, do_sample=False)
    assert generate(max_gen_toks=8, do_sample=True, temperature=1e-4) == greedy
    hot = generate(max_gen_toks=8, do_sample=True, temperature=1.5)
    assert hot == generate(max_gen_toks=8, do_sample=True, temperature=1.5)  # seeded
    assert hot != greedy
    short = generate(max_gen_toks=2, do_sample=False)
    assert short != greedy
    assert all(g.startswith(t) for g, t in zip(greedy, short, strict=True))
    cut = [g.split(" ")[0] for g in greedy]
    requests = [SimpleNamespace(args=(c, {"until": [" "], "max_gen_toks": 8})) for c in contexts]
    assert lm.generate_until(requests) == cut


def test_results_do_not_depend_on_the_batch_size(setup):
    loaded, mesh = setup["loaded"], make_mesh()
    lm = ZooLM(
        loaded.model, loaded.tokenizer, mesh=mesh, batch_size=3, stop_tokens=loaded.stop_tokens
    )
    other = setup["run"](lm)
    for task in TASKS:
        ref, got = _by_doc(setup["zoo"], task), _by_doc(other, task)
        for doc in ref:
            a, b = ref[doc]["filtered_resps"], got[doc]["filtered_resps"]
            if task == ANSWER:
                assert a == b
            else:
                np.testing.assert_allclose(np.array(b, float), np.array(a, float), rtol=1e-6)
        assert _scores(other, task).keys() == _scores(setup["zoo"], task).keys()


def test_a_task_compiles_a_handful_of_programs(setup):
    # Every scored row of every task went through one of a few (bucket) shapes.
    assert 1 <= setup["lm"].scorer._fn.compilations() <= 4


def test_batches_are_bucketed_by_length_and_cover_every_request():
    rng = np.random.default_rng(0)
    lengths = [int(n) for n in rng.integers(1, 129, 200)]
    batches = plan_batches(lengths, 8, 128)
    assert sorted(i for b in batches for i in b.indices) == list(range(200))
    assert {b.length for b in batches} <= {16, 32, 64, 128}
    for b in batches:
        assert len(b.indices) <= 8
        assert all(lengths[i] <= b.length for i in b.indices)
        assert all(lengths[i] > b.length // 2 or b.length == 16 for i in b.indices)


def test_task_metrics_are_named_by_task_and_metric():
    results = {
        "results": {
            "t": {
                "alias": "t",
                "sample_len": 3,
                "acc,none": 0.5,
                "acc_stderr,none": 0.1,
                "em,strict": 1.0,
                "ppl,none": "N/A",
            }
        }
    }
    assert task_metrics(results) == {"lm_eval/t/acc": 0.5, "lm_eval/t/em_strict": 1.0}


def test_zoo_eval_prints_the_table_and_writes_the_json(setup, tmp_path, capsys):
    out = tmp_path / "results.json"
    code = main(
        [
            "eval",
            str(setup["dir"]),
            "--tasks",
            CHOICE,
            "--include-path",
            str(setup["tasks"]),
            "--limit",
            "6",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    written = json.loads(out.read_text())
    ref = _by_doc(setup["hf"], CHOICE)
    acc = np.mean([ref[d]["acc"] for d in range(6)])
    assert written["results"][CHOICE]["acc,none"] == pytest.approx(acc)
    # lm-eval's columns, and the row of `acc` with its value and standard error
    table = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if "|" in line]
    assert [c.strip() for c in table[0]] == list(COLUMNS)
    (row,) = [[c.strip() for c in r] for r in table if r[4].strip() == "acc"]
    stderr = written["results"][CHOICE]["acc_stderr,none"]
    assert row[0] == CHOICE and row[6:] == [f"{acc:.4f}", "±", f"{stderr:.4f}"]


def test_a_missing_lm_eval_names_the_command_that_installs_it_here(monkeypatch):
    """In a checkout, the make target that installs the extra into .venv with the
    constraints (a bare pip install would go outside both); elsewhere, pip's extra."""
    from zoo_train._usage import UsageError

    root = pathlib.Path(__file__).resolve().parents[3]
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    with pytest.raises(UsageError) as refused:
        require_lm_eval()
    assert str(refused.value).endswith(f"run `make eval-deps` in {root}.")
    assert INSTALL == "pip install 'zoo-train[eval]'"


def test_a_run_at_a_step_gives_the_checkpoints_numbers(setup, tmp_path, capsys):
    from zoo_train._usage import UsageError

    run = tmp_path / "run"
    assert main(["convert", str(setup["dir"]), str(run)]) == 0  # a run with step 0
    out = tmp_path / "results.json"
    args = ["eval", str(run), "--tasks", CHOICE, "--include-path", str(setup["tasks"])]
    assert main([*args, "--step", "0", "--limit", "6", "--output", str(out)]) == 0
    ref = _by_doc(setup["hf"], CHOICE)
    acc = np.mean([ref[d]["acc"] for d in range(6)])
    assert json.loads(out.read_text())["results"][CHOICE]["acc,none"] == pytest.approx(acc)
    capsys.readouterr()
    assert main([*args, "--step", "3"]) == 2
    assert "no checkpoint of step 3" in capsys.readouterr().err
    with pytest.raises(UsageError, match="no steps"):
        load_eval_model(str(setup["dir"]), mesh=make_mesh(), rules=make_rules(None), step=0)


def test_a_peft_adapter_gives_the_hf_backends_numbers_with_it(setup, tmp_path):
    import jax
    import jax.numpy as jnp
    from lm_eval.models.huggingface import HFLM
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    import zoo_models
    from zoo_train.peft import LoRAConfig, LoRALinear, apply_lora, save_peft_adapter

    config = LoRAConfig(rank=4, alpha=8.0, targets=("q", "v"))
    model = apply_lora(zoo_models.load_hf(setup["dir"]), config, key=jax.random.key(1))
    # Non-zero B: an adapter that changes the model (a fresh one starts at zero).
    model = jax.tree.map(
        lambda x: (
            LoRALinear(x.base, x.lora_a, 0.1 + jnp.zeros_like(x.lora_b), x.scale)
            if isinstance(x, LoRALinear)
            else x
        ),
        model,
        is_leaf=lambda x: isinstance(x, LoRALinear),
    )
    adapter = save_peft_adapter(model, tmp_path / "adapter", config, base=str(setup["dir"]))
    mesh, rules = make_mesh(), make_rules(None)
    loaded = load_eval_model(str(setup["dir"]), mesh=mesh, rules=rules, adapter=str(adapter))
    lm = ZooLM(loaded.model, loaded.tokenizer, mesh=mesh, batch_size=4)
    # The reference: PEFT's own merge of the adapter, saved (lm-eval's `peft=` would first cut
    # the embeddings to the tiny tokenizer's 123 tokens, a different model).
    merged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(setup["dir"]), adapter)
    merged.merge_and_unload().save_pretrained(tmp_path / "merged")
    hf = HFLM(
        pretrained=str(tmp_path / "merged"),
        tokenizer=str(setup["dir"]),
        dtype="float32",
        device="cpu",
        batch_size=4,
    )
    ref, got = (_choice_lls(setup, m) for m in (hf, lm))
    base = np.array([x[0][0] for d in range(6) for x in _by_doc(setup["hf"], CHOICE)[d]["resps"]])
    assert np.abs(ref - base).max() > 1e-3  # the adapter changes the model
    np.testing.assert_allclose(got, ref, atol=1e-4)


def _choice_lls(setup, lm):
    """The log-likelihood of every choice of the first 6 documents, in document order."""
    results = run_tasks(
        lm, [CHOICE], include_path=str(setup["tasks"]), limit=6, log_samples=True,
        bootstrap_iters=0,
    )  # fmt: skip
    by_doc = _by_doc(results, CHOICE)
    return np.array([x[0][0] for d in range(6) for x in by_doc[d]["resps"]])


def _lm_eval_records(run):
    from zoo_train import read_metrics

    return [r for r in read_metrics(run / "metrics.jsonl") if any("lm_eval/" in k for k in r)]


def test_the_training_hook_scores_the_chosen_steps_once_across_a_resume(setup, tmp_path, capsys):
    from zoo_train.testing import write_corpus

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for f in setup["tasks"].iterdir():
        (tasks / f.name).write_text(f.read_text())
    # A task whose data is gone: it fails when it runs, once, and the run goes on.
    broken = (tasks / f"{CHOICE}.yaml").read_text().replace("data.jsonl", "missing.jsonl")
    (tasks / "broken.yaml").write_text(broken.replace(f"task: {CHOICE}", "task: tiny_broken"))
    run = tmp_path / "run"
    args = ["finetune", "--from-hf", str(setup["dir"]), "--data", str(write_corpus(tmp_path / "c")),
            "--out", str(run), "--steps", "6", "--batch-size", "2", "--seq-len", "32",
            "--save-every", "2", "--eval-every", "0", "--no-progress", "--lr", "1e-2",
            "--eval-harness", f"{CHOICE},tiny_broken", "--eval-harness-every", "2",
            "--eval-harness-include-path", str(tasks), "--eval-harness-limit", "4"]  # fmt: skip
    assert main([*args, "--stop-at", "4"]) == 0
    assert capsys.readouterr().err.count("tiny_broken failed") == 1  # at step 2, then left out
    assert [r["step"] for r in _lm_eval_records(run)] == [2, 4]
    assert main(args) == 0  # resumes at step 4: scores step 6, not 4 again
    records = _lm_eval_records(run)
    assert [r["step"] for r in records] == [2, 4, 6]
    assert all(set(r) == {"step", f"lm_eval/{CHOICE}/acc", f"lm_eval/{CHOICE}/acc_norm"}
               for r in records)  # fmt: skip
    # TensorBoard shows them under the same names, at the same steps.
    from zoo_train.tracking import TENSORBOARD_DIR, shown_scalars

    shown = shown_scalars(run / TENSORBOARD_DIR)
    for r in records:
        assert shown[(f"lm_eval/{CHOICE}/acc", r["step"])] == pytest.approx(
            r[f"lm_eval/{CHOICE}/acc"]
        )
    # The hook scored the model being trained: what `zoo eval` gives on its checkpoint.
    out = tmp_path / "at6.json"
    assert main(["eval", str(run), "--step", "6", "--tasks", CHOICE, "--include-path", str(tasks),
                 "--limit", "4", "--output", str(out)]) == 0  # fmt: skip
    acc = json.loads(out.read_text())["results"][CHOICE]["acc_norm,none"]
    assert records[-1][f"lm_eval/{CHOICE}/acc_norm"] == pytest.approx(acc)


@pytest.mark.parametrize("at_start", [False, True])
def test_step_0_is_scored_only_when_asked_and_never_twice(tmp_path, at_start):
    from zoo_train.eval_harness import HarnessHook
    from zoo_train.loop import LoopView

    scored = []
    hook = HarnessHook([CHOICE], None, steps=10, every=5, at_start=at_start)
    hook.evaluate = lambda view, step: scored.append(step)  # the choice of steps alone
    view = LoopView(tmp_path, *[None] * 5, None, {})
    hook.start(view, 0)
    assert scored == ([0] if at_start else [])
    (tmp_path / "metrics.jsonl").write_text(
        json.dumps({"step": 0, f"lm_eval/{CHOICE}/acc": 0.5}) + "\n"
    )
    hook.start(view, 0)  # a run restarted from scratch finds step 0 scored
    assert scored == ([0] if at_start else [])
    assert [s for s in range(11) if hook.due(s)] == [5, 10]


def test_a_task_file_lm_eval_cannot_read_is_named_and_too_many_shots_are_one_sentence(
    setup, tmp_path
):
    """lm-eval's index passes over a task file it cannot parse, and its sampler raises
    "Sample larger than population" for more shots than a task holds: both are one sentence
    that names what to change."""
    from zoo_train import UsageError

    (tmp_path / "good.yaml").write_text((setup["tasks"] / f"{CHOICE}.yaml").read_text())
    (tmp_path / "bad_task.yaml").write_text("task: bad_task\ndataset_path: json\n  oops: [\n")
    with pytest.raises(UsageError) as refused:
        run_tasks(setup["lm"], ["bad_task"], include_path=str(tmp_path), bootstrap_iters=0)
    said = str(refused.value)
    assert said.startswith("No task named 'bad_task'") and "cannot be read; fix it." in said
    assert f"the task file {tmp_path / 'bad_task.yaml'} (" in said
    with pytest.raises(UsageError, match="--num-fewshot 1000 asks for more examples than"):
        run_tasks(setup["lm"], [CHOICE], include_path=str(setup["tasks"]), num_fewshot=1000,
                  limit=2, bootstrap_iters=0)  # fmt: skip


def test_a_task_lm_eval_cannot_run_is_one_sentence_naming_it_and_why(setup, tmp_path, capsys):
    # A task whose data is not there (as arc_easy's is not without a network): lm-eval's
    # traceback becomes one sentence naming the task and the cause, exit 2.
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "gone.yaml").write_text(
        (setup["tasks"] / f"{CHOICE}.yaml")
        .read_text()
        .replace(f"task: {CHOICE}", "task: gone_task")
        .replace(str(setup["tasks"] / "data.jsonl"), str(tmp_path / "missing.jsonl"))
    )
    (tasks / "ok.yaml").write_text((setup["tasks"] / f"{CHOICE}.yaml").read_text())
    capsys.readouterr()
    args = ["eval", str(setup["dir"]), "--tasks", f"{CHOICE},gone_task", "--limit", "2"]
    assert main([*args, "--include-path", str(tasks)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("zoo eval: error: lm-eval could not run the task 'gone_task': ")
    assert "FileNotFoundError" in line and "missing.jsonl" in line


def test_lm_eval_chatter_stays_out_of_a_redirected_log(setup, tmp_path, monkeypatch, capfd):
    # Standard error redirected (a log file), outside a git repository: lm-eval's progress
    # bars and git's `fatal: not a git repository` are not written; its results are the same.
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    results = run_tasks(
        setup["lm"], [CHOICE], include_path=str(setup["tasks"]), log_samples=True,
        bootstrap_iters=0,
    )  # fmt: skip
    err = capfd.readouterr().err
    assert "not a git repository" not in err and "%|" not in err and "it/s]" not in err
    assert _scores(results, CHOICE) == _scores(setup["zoo"], CHOICE)
