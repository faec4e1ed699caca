"""lm-evaluation-harness requests per second: zoo's backend (``zoo_train.eval_harness.ZooLM``,
jax) against lm-eval's own Hugging Face backend (``hf``, PyTorch eager) on the same checkpoint
and tasks, on the CPU.

A Llama of 4 layers, width 256 (vocabulary of the tiny test tokenizer, 512 positions) is saved
as a Hugging Face directory; both backends load it in float32 and run the same local tasks, one
per request type (multiple choice: ``loglikelihood``; ``loglikelihood_rolling``; greedy
``generate_until``), with the same batch size. Only the backends' own calls are timed (lm-eval's
task building and metrics are the same for both). zoo's first pass compiles its programs: its
time less a later pass's is reported as compile time; the rates are those of later passes,
interleaved zoo, hf, zoo, hf, medians.
"""

from __future__ import annotations

import pathlib
import tempfile
import time
from collections.abc import Callable
from typing import Any

from .harness import llama_checkpoint, median, new_result, table, target, unavailable

NAME = "eval"
TITLE = "lm-eval requests per second: zoo's backend against lm-eval's hf backend (CPU)"
KINDS = ("loglikelihood", "loglikelihood_rolling", "generate_until")
SHAPE = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=512)  # fmt: skip


class Timed:
    """Seconds and requests of an lm-eval model's request methods (wrapped on the instance)."""

    def __init__(self, lm: Any) -> None:
        self.lm = lm
        self.seconds = dict.fromkeys(KINDS, 0.0)
        self.requests = dict.fromkeys(KINDS, 0)
        for kind in KINDS:
            setattr(lm, kind, self._wrap(kind, getattr(lm, kind)))

    def _wrap(self, kind: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(requests: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = method(requests, *args, **kwargs)
            self.seconds[kind] += time.perf_counter() - start
            self.requests[kind] += len(requests)
            return out

        return timed

    def take(self) -> dict[str, float]:
        """Seconds per request type since the last call, and reset."""
        out = dict(self.seconds)
        self.seconds = dict.fromkeys(KINDS, 0.0)
        return out


def _backends(model_dir: pathlib.Path, batch_size: int) -> dict[str, Any]:
    from lm_eval.models.huggingface import HFLM

    from zoo_train.eval_harness import ZooLM, load_eval_model
    from zoo_train.parallel import make_mesh, make_rules

    mesh, rules = make_mesh(), make_rules(None)
    loaded = load_eval_model(str(model_dir), mesh=mesh, rules=rules)
    zoo = ZooLM(loaded.model, loaded.tokenizer, mesh=mesh, rules=rules, batch_size=batch_size,
                stop_tokens=loaded.stop_tokens)  # fmt: skip
    hf = HFLM(pretrained=str(model_dir), dtype="float32", device="cpu", batch_size=batch_size)
    return {"zoo": zoo, "hf": hf}


def measure(quick: bool) -> dict[str, Any]:
    """Seconds per request type of each backend's passes; the first pass apart."""
    import torch

    from zoo_train.eval_harness import find_tasks, run_tasks
    from zoo_train.testing import EVAL_TASKS, write_eval_tasks

    torch.set_num_threads(2)
    setup = {"docs": 16 if quick else 64, "batch_size": 16, "rounds": 2 if quick else 4}
    with tempfile.TemporaryDirectory(prefix="zoo-bench-eval-") as scratch:
        root = pathlib.Path(scratch)
        model_dir = llama_checkpoint(root / "hf", SHAPE)
        tasks = write_eval_tasks(root / "tasks", docs=setup["docs"], longest=600)
        names = list(EVAL_TASKS.values())
        manager = find_tasks(names, str(tasks))
        timers = {k: Timed(lm) for k, lm in _backends(model_dir, setup["batch_size"]).items()}
        passes: dict[str, list[dict[str, float]]] = {name: [] for name in timers}
        for _ in range(setup["rounds"] + 1):  # the first pass compiles (zoo) and warms up (hf)
            for name, timer in timers.items():
                run_tasks(timer.lm, names, task_manager=manager, bootstrap_iters=0)
                passes[name].append(timer.take())
        requests = {k: n // (setup["rounds"] + 1) for k, n in timers["zoo"].requests.items()}
    return {"setup": setup, "shape": SHAPE, "requests": requests, "passes": passes}


def run(quick: bool) -> dict[str, Any]:
    """The measurement; a result dict (see :mod:`bench.harness`)."""
    try:
        import lm_eval  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        return unavailable(NAME, TITLE, quick, f"needs zoo-train[eval] and torch ({e})")
    result = new_result(NAME, TITLE, quick)
    result["data"] = measure(quick)
    return report(result)


def _warm(passes: list[dict[str, float]], kind: str) -> float:
    return median([p[kind] for p in passes[1:]])


def report(result: dict[str, Any]) -> dict[str, Any]:
    """Tables and targets from the stored numbers."""
    data = result["data"]
    setup, requests, passes = data["setup"], data["requests"], data["passes"]
    rows, ratios = [], {}
    for kind in KINDS:
        rate = {name: requests[kind] / _warm(p, kind) for name, p in passes.items()}
        compile_s = passes["zoo"][0][kind] - _warm(passes["zoo"], kind)
        ratios[kind] = rate["zoo"] / rate["hf"]
        rows.append([kind, str(requests[kind]), f"{rate['zoo']:.1f}", f"{rate['hf']:.1f}",
                     f"{ratios[kind]:.2f}x", f"{compile_s:.1f}"])  # fmt: skip
    total = {name: sum(_warm(p, k) for k in KINDS) for name, p in passes.items()}
    overall = total["hf"] / total["zoo"]
    rows.append(["all", str(sum(requests.values())), "", "", f"{overall:.2f}x", ""])
    shape = data["shape"]
    note = (
        f"Llama, {shape['num_hidden_layers']} layers, width {shape['hidden_size']}, "
        f"{shape['max_position_embeddings']} positions, vocabulary 256, float32; "
        f"{setup['docs']} documents per task, batch size {setup['batch_size']}; medians of "
        f"{setup['rounds']} passes after the first, interleaved. Compile: zoo's first pass less "
        "a later one."
    )
    result["tables"] = [
        table(
            "Requests per second by request type (after compilation)",
            ["requests", "count", "zoo req/s", "hf req/s", "zoo / hf", "zoo compile s"],
            rows,
            [note],
        )
    ]
    result["targets"] = [
        target(
            "zoo's backend >= 1.0x lm-eval's hf backend in requests per second after compilation",
            ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()) + f"; all {overall:.2f}x",
            overall >= 1.0,
        )
    ]
    return result
