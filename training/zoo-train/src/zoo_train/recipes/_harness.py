"""The recipe step that adds benchmark tasks to a run: ``--eval-harness T1,T2`` as a loop hook
on the model being trained."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .._usage import UsageError
from ..settings import EvalHarnessSettings


def harness_hooks(
    settings: EvalHarnessSettings, tokenizer: Any, *, steps: int, stop_tokens: tuple[int, ...]
) -> list[tuple[Callable[[Any], None], int | None]]:
    """The loop hooks of ``settings`` (none without ``--eval-harness``), checked before the
    run starts: lm-eval installed and every task found.

    Raises:
        UsageError: an ``--eval-harness-*`` flag without ``--eval-harness``, lm-eval missing,
            or a task that is not found.
    """
    if settings.tasks is None:
        changed = [
            f.name
            for f in dataclasses.fields(settings)
            if getattr(settings, f.name) != f.default and f.name != "tasks"
        ]
        if changed:
            flag = "--eval-harness-" + changed[0].replace("_", "-")
            raise UsageError(f"{flag} goes with --eval-harness T1,T2; add it or drop {flag}.")
        return []
    from ..eval_harness import require_lm_eval

    require_lm_eval()
    from ..eval_harness import HarnessHook, find_tasks

    tasks = [t.strip() for t in settings.tasks.split(",") if t.strip()]
    if not tasks:
        raise UsageError("--eval-harness names no task; pass e.g. --eval-harness arc_easy.")
    manager = find_tasks(tasks, settings.include_path)
    unknown = [t for t in tasks if not manager.match_tasks([t])]
    if unknown:
        raise UsageError(
            f"--eval-harness: no task named {unknown[0]!r}; check the name, or pass "
            "--eval-harness-include-path DIR holding its YAML."
        )
    hook = HarnessHook(
        tasks,
        tokenizer,
        steps=steps,
        every=settings.every,
        at_start=settings.at_start,
        include_path=settings.include_path,
        limit=settings.limit,
        batch_size=settings.batch_size,
        stop_tokens=stop_tokens,
    )
    return [(hook, None)]
