"""``zoo eval MODEL --tasks T1,T2``: lm-evaluation-harness tasks on a zoo run (any step), a
Hugging Face directory, or a base model with a PEFT adapter; lm-eval's table printed and its
JSON written."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from .._usage import UsageError
from ..settings import bounded
from ._multiprocess import join_agreeing

# Flags that may differ between the processes of one run.
_PER_PROCESS = ("process_id", "coordinator")


def add_benchmark_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of benchmark tasks (``--batch-size``, ``--step`` and the model's flags are
    ``zoo eval``'s own)."""
    p.add_argument(
        "--tasks",
        metavar="T1,T2",
        default=None,
        help="lm-evaluation-harness tasks to run instead of the held-out loss (needs zoo-train's "
        "eval extra: `make eval-deps` in a zoo checkout, else pip install 'zoo-train[eval]')",
    )
    p.add_argument(
        "--include-path",
        metavar="DIR",
        default=None,
        help="a directory of task YAML files (local tasks over local data run offline)",
    )
    p.add_argument(
        "--num-fewshot",
        type=bounded(int, "[0, inf)"),
        default=None,
        metavar="N",
        help="examples in each prompt (default: the task's)",
    )
    p.add_argument(
        "--limit",
        type=bounded(int, "[1, inf)"),
        default=None,
        metavar="N",
        help="at most N documents per task",
    )
    p.add_argument(
        "--output",
        metavar="FILE",
        default=None,
        help="write lm-eval's results as JSON to FILE",
    )
    p.add_argument(
        "--adapter",
        metavar="DIR",
        default=None,
        help="a PEFT LoRA adapter directory, merged into the Hugging Face base model",
    )
    p.add_argument(
        "--apply-chat-template",
        action="store_true",
        help="render prompts with the model's chat template",
    )
    p.add_argument(
        "--system-instruction",
        metavar="TEXT",
        default=None,
        help="a system message before every prompt",
    )


def check_benchmark_flags(args: argparse.Namespace) -> None:
    """Benchmark flags without ``--tasks``, or ``--data`` with it, are refused."""
    if args.tasks is None:
        given = [
            flag
            for flag, value in (
                ("--include-path", args.include_path),
                ("--num-fewshot", args.num_fewshot),
                ("--limit", args.limit),
                ("--output", args.output),
                ("--adapter", args.adapter),
                ("--system-instruction", args.system_instruction),
            )
            if value is not None
        ] + (["--apply-chat-template"] if args.apply_chat_template else [])
        if given:
            raise UsageError(f"{given[0]} goes with --tasks; add --tasks T1,T2 or drop it.")
    elif args.data:
        raise UsageError("--data is for the held-out loss; drop it, or drop --tasks.")


def run_benchmarks(args: argparse.Namespace) -> int:
    """Run ``--tasks`` on the model, print lm-eval's table, write ``--output``."""
    # lm-eval, JAX and the models load here: not on the `zoo eval --help` path.
    from ..eval_harness import require_lm_eval

    require_lm_eval()
    from ..eval_harness import ZooLM, load_eval_model, results_table, run_tasks
    from ..parallel import is_primary
    from ..recipes import mesh_and_rules

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not tasks:
        raise UsageError("--tasks names no task; pass e.g. --tasks arc_easy,my_task.")
    if args.include_path is not None and not pathlib.Path(args.include_path).is_dir():
        raise UsageError(f"--include-path {args.include_path!r} is not a directory.")
    # On several processes each one runs the same requests and places its devices' rows.
    agreed = {k: v for k, v in vars(args).items() if k[0] != "_" and k not in _PER_PROCESS}
    join_agreeing(args, agreed)
    mesh, rules = mesh_and_rules(args.mesh)
    loaded = load_eval_model(
        args.source,
        mesh=mesh,
        rules=rules,
        step=args.step,
        adapter=args.adapter,
        tokenizer=args.tokenizer,
        attention_implementation=args.attention_implementation,
    )
    print(f"zoo: evaluating {loaded.description} on {', '.join(tasks)}", file=sys.stderr)
    lm = ZooLM(
        loaded.model,
        loaded.tokenizer,
        mesh=mesh,
        rules=rules,
        batch_size=args.batch_size,
        stop_tokens=loaded.stop_tokens,
    )
    results = run_tasks(
        lm,
        tasks,
        include_path=args.include_path,
        num_fewshot=args.num_fewshot,
        limit=args.limit,
        apply_chat_template=args.apply_chat_template,
        system_instruction=args.system_instruction,
    )
    if not is_primary():
        return 0
    print(results_table(results))
    if args.output is not None:
        _write_json(pathlib.Path(args.output), results)
        print(f"zoo: results written to {args.output}", file=sys.stderr)
    return 0


def _write_json(path: pathlib.Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # lm-eval's results hold a few non-JSON values (dtypes, paths): written as their text.
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
