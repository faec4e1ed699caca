"""Running lm-eval tasks on a model, and their scores as flat metric names."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager

from .._usage import UsageError
from ._quiet import quiet_when_redirected


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
        with quiet_when_redirected():
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
                # The model is JAX's: seeding torch only imported it (seconds a process).
                torch_random_seed=None,
            )
    except ValueError as e:  # random.sample's words for a few-shot pool too small
        if num_fewshot is None or "larger than population" not in str(e):
            raise _task_failure(e, tasks, manager) from None
        raise UsageError(
            f"--num-fewshot {num_fewshot} asks for more examples than a task's few-shot "
            "documents hold; lower it, or drop it for each task's own."
        ) from None
    except Exception as e:
        raise _task_failure(e, tasks, manager) from None
    if results is None:  # lm-eval returns nothing on ranks other than 0; zoo runs one rank
        raise RuntimeError("lm-eval returned no results.")
    return dict(results)


def _raised_in_zoo(error: BaseException) -> bool:
    """Whether ``error`` (or what it came from) was raised inside zoo's own code (the backend
    lm-eval calls): a fault of zoo, kept with its traceback."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        frames = []
        while tb is not None:
            frames.append(str(tb.tb_frame.f_globals.get("__name__", "")))
            tb = tb.tb_next
        # The first frame is run_tasks's own call into lm-eval.
        if any(name.startswith("zoo_") for name in frames[1:]):
            return True
        current = current.__cause__ or current.__context__
    return False


def _root_cause(error: BaseException) -> str:
    """The first exception of ``error``'s chain, as ``Type: first line of its message``."""
    seen: set[int] = set()
    root = error
    while id(root) not in seen:
        seen.add(id(root))
        nxt = root.__cause__ or root.__context__
        if nxt is None:
            break
        root = nxt
    message = " ".join(str(root).split())
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{type(root).__name__}: {message}" if message else type(root).__name__


def _task_failure(error: Exception, tasks: Sequence[str], manager: Any) -> BaseException:
    """One sentence naming the task that failed and why (``error`` itself when zoo's own code
    raised it). The task is the one whose loading fails again when each is loaded alone, else
    every task asked for."""
    if isinstance(error, UsageError) or _raised_in_zoo(error):
        return error
    named = list(tasks)
    if len(tasks) > 1:
        for task in tasks:
            try:
                with quiet_when_redirected():
                    manager.load([task])
            except Exception:
                named = [task]
                break
    which = f"the task {named[0]!r}" if len(named) == 1 else f"the tasks {', '.join(named)}"
    cause = _root_cause(error)
    hint = ""
    if any(word in cause for word in ("Connection", "resolve", "offline", "Offline", "Timeout")):
        hint = " (its data is downloaded from the Hugging Face Hub: is there a network?)"
    return UsageError(f"lm-eval could not run {which}: {cause}{hint}; fix that, or drop the task.")


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
