"""Running lm-eval tasks on a model, and their scores as flat metric names."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager

from .._usage import UsageError


def run_tasks(
    lm: Any,
    tasks: Sequence[str],
    *,
    include_path: str | None = None,
    num_fewshot: int | None = None,
    limit: int | float | None = None,
    apply_chat_template: bool = False,
    system_instruction: str | None = None,
    log_samples: bool = False,
    bootstrap_iters: int = 100000,
    task_manager: Any = None,
) -> dict[str, Any]:
    """lm-eval's results of ``tasks`` on the model ``lm`` (its JSON: ``results``, ``configs``,
    ``versions``, ... and ``samples`` with ``log_samples``). Standard errors that need
    bootstrapping take ``bootstrap_iters`` resamples (0: none).

    With ``include_path`` the task definitions of that directory (YAML) are found beside
    lm-eval's own; a task over local files then needs no network. ``task_manager`` (from
    :func:`find_tasks`) saves finding the tasks again.

    Raises:
        UsageError: a task name that neither lm-eval nor ``include_path`` defines.
    """
    manager = task_manager or find_tasks(tasks, include_path)
    unknown = [t for t in tasks if not manager.match_tasks([t])]
    if unknown:
        where = f"in {include_path!r} or " if include_path else ""
        named = f"No task named {', '.join(map(repr, unknown))} {where}in lm-eval's tasks"
        broken = unreadable_task_files(include_path) if include_path else []
        if broken:
            more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
            raise UsageError(f"{named}: the task file {broken[0]}{more} cannot be read; fix it.")
        raise UsageError(f"{named}; check the name, or pass --include-path DIR holding its YAML.")
    # lm-eval bootstraps in a forked pool, and a fork of a process running JAX's threads can
    # deadlock: the resamples are drawn in this process instead.
    os.environ["DISABLE_MULTIPROC"] = "1"
    try:
        results = simple_evaluate(
            model=lm,
            tasks=list(tasks),
            num_fewshot=num_fewshot,
            limit=limit,
            task_manager=manager,
            apply_chat_template=apply_chat_template,
            system_instruction=system_instruction,
            log_samples=log_samples,
            bootstrap_iters=bootstrap_iters,
        )
    except ValueError as e:  # random.sample's words for a few-shot pool too small
        if num_fewshot is None or "larger than population" not in str(e):
            raise
        raise UsageError(
            f"--num-fewshot {num_fewshot} asks for more examples than a task's few-shot "
            "documents hold; lower it, or drop it for each task's own."
        ) from None
    if results is None:  # lm-eval returns nothing on ranks other than 0; zoo runs one rank
        raise RuntimeError("lm-eval returned no results.")
    return dict(results)


def unreadable_task_files(include_path: str) -> list[str]:
    """Each task file under ``include_path`` that lm-eval cannot read, as ``PATH (why)``:
    lm-eval's index passes over them unsaid, so a task in one reads as missing. Read as the
    index reads them, ``!function`` left unresolved (nothing of theirs runs here)."""
    import pathlib

    try:
        from lm_eval.tasks._yaml_loader import load_yaml
    except ImportError:  # another lm-eval layout: nothing to add to "no task named"
        return []
    out = []
    for path in sorted(pathlib.Path(include_path).glob("**/*.yaml")):
        try:
            config = load_yaml(path, resolve_func=False, recursive=True)
            if not isinstance(config, dict) or not {"task", "group", "class"} & set(config):
                raise ValueError("it names no task, group or class")
        except Exception as e:
            why = " ".join(str(e).split())[:160]
            out.append(f"{path} ({type(e).__name__}: {why})")
    return out


def find_tasks(tasks: Sequence[str], include_path: str | None = None) -> Any:
    """lm-eval's ``TaskManager`` for ``tasks``: the tasks of ``include_path`` alone when they hold every task asked for (indexing
    lm-eval's thousands of task files takes seconds), else those and lm-eval's."""
    if include_path is not None:
        local = TaskManager(include_path=include_path, include_defaults=False)
        if all(local.match_tasks([t]) for t in tasks):
            return local
    return TaskManager(include_path=include_path)


def task_metrics(results: Mapping[str, Any], prefix: str = "lm_eval") -> dict[str, float]:
    """The numbers of ``results["results"]`` as ``{"<prefix>/<task>/<metric>": value}``:
    lm-eval's ``"acc,none"`` becomes ``acc`` (another filter keeps its name, ``acc,strict``
    becomes ``acc_strict``); standard errors and non-numbers are left out."""
    out: dict[str, float] = {}
    for task, scores in results.get("results", {}).items():
        for key, value in scores.items():
            metric, comma, filt = key.partition(",")
            if not comma or "_stderr" in metric or isinstance(value, bool):
                continue
            if not isinstance(value, int | float) or not math.isfinite(value):
                continue
            name = metric if filt in ("", "none") else f"{metric}_{filt}"
            out[f"{prefix}/{task}/{name}"] = float(value)
    return out
