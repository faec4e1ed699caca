"""The lm-eval backend on a mesh of 8 devices: every request's log-likelihood, rolling
log-likelihood and greedy generation as on one device (a batch of 3 requests padded to 8
rows, so filler rows and the split over devices are both exercised)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

pytest.importorskip("lm_eval", reason="lm-eval is zoo-train's `eval` extra")
pytest.importorskip("torch", reason="the tiny checkpoint is made with transformers")

from zoo_train.eval_harness import ZooLM, load_eval_model, run_tasks
from zoo_train.parallel import make_mesh, make_rules
from zoo_train.testing import EVAL_TASKS, tiny_hf_llama, write_eval_tasks


def _results(model_dir, tasks, mesh):
    rules = make_rules(None)
    loaded = load_eval_model(str(model_dir), mesh=mesh, rules=rules)
    lm = ZooLM(loaded.model, loaded.tokenizer, mesh=mesh, rules=rules, batch_size=3,
               stop_tokens=loaded.stop_tokens)  # fmt: skip
    assert lm.scorer.placer.shards == len(mesh.devices.flat)
    out = run_tasks(lm, list(EVAL_TASKS.values()), include_path=str(tasks), limit=6,
                    log_samples=True, bootstrap_iters=0)  # fmt: skip
    return {
        task: [s["filtered_resps"] for s in sorted(samples, key=lambda s: s["doc_id"])]
        for task, samples in out["samples"].items()
    }


def test_eight_devices_give_one_devices_results(tmp_path):
    model_dir = tiny_hf_llama(tmp_path / "hf")
    tasks = write_eval_tasks(tmp_path / "tasks", longest=200)
    one = _results(model_dir, tasks, make_mesh(devices=jax.devices()[:1]))
    eight = _results(model_dir, tasks, make_mesh())
    assert one.keys() == eight.keys() == set(EVAL_TASKS.values())
    for task in one:
        assert len(one[task]) == 6
        if task == EVAL_TASKS["generate_until"]:
            assert eight[task] == one[task]
        else:
            got = np.array(eight[task], dtype=float)
            np.testing.assert_allclose(got, np.array(one[task], dtype=float), rtol=1e-5)
