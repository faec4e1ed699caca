"""Benchmark tasks made on the spot: lm-eval YAML files over local JSON lines (no download),
one of each request type, in the words of the tiny tokenizer."""

from __future__ import annotations

import json
import pathlib

import numpy as np

from zoo_data.testing import WORDS

#: The tasks :func:`write_eval_tasks` defines, by request type.
EVAL_TASKS = {
    "multiple_choice": "tiny_choice",
    "loglikelihood_rolling": "tiny_text",
    "generate_until": "tiny_answer",
}

_COMMON = """dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
"""

_TYPES = {
    "tiny_choice": """output_type: multiple_choice
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_choice: "{{choices}}"
doc_to_target: label
metric_list:
  - metric: acc
  - metric: acc_norm
""",
    "tiny_text": """output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{text}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
""",
    "tiny_answer": """output_type: generate_until
doc_to_text: "{{question}} ="
doc_to_target: "{{answer}}"
generation_kwargs:
  until: ["\\n", "."]
  max_gen_toks: 12
  do_sample: false
metric_list:
  - metric: exact_match
""",
}


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(str(w) for w in rng.choice(WORDS, n))


def write_eval_tasks(
    directory: pathlib.Path, *, docs: int = 12, longest: int = 300, seed: int = 0
) -> pathlib.Path:
    """``directory`` holding ``data.jsonl`` (``docs`` documents) and a task YAML per entry of
    :data:`EVAL_TASKS`: four choices of one to three words, texts of up to ``longest`` words
    (longer than the tiny model's 128 positions: several rolling windows), and answers cut at a
    newline or a full stop. Pass it as ``--include-path``."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "question": _words(rng, 5),
            "choices": [_words(rng, int(rng.integers(1, 4))) for _ in range(4)],
            "label": int(rng.integers(0, 4)),
            "text": _words(rng, int(rng.integers(3, longest + 1))),
            "answer": _words(rng, 2),
        }
        for _ in range(docs)
    ]
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for task, body in _TYPES.items():
        text = f"task: {task}\n" + _COMMON.format(data=json.dumps(str(data))) + body
        (directory / f"{task}.yaml").write_text(text)
    return directory
