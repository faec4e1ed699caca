"""zoo_train.testing: helpers for tests of zoo and of code built on it.

``zoo`` in a subprocess (``run_zoo``), tiny Hugging Face checkpoints made on the spot
(``tiny_hf_llama``, ``hf_logits``; these need torch and transformers, which zoo-train does not
depend on) and lm-eval tasks over local files (``write_eval_tasks``). Tiny corpora and
tokenizers are zoo-data's (``zoo_data.testing``), re-exported here for tests that use both.
"""

from zoo_data.testing import CHAT_TEMPLATE as CHAT_TEMPLATE
from zoo_data.testing import SPECIALS as SPECIALS
from zoo_data.testing import WORDS as WORDS
from zoo_data.testing import tiny_tokenizer as tiny_tokenizer
from zoo_data.testing import write_corpus as write_corpus

from ._eval_tasks import EVAL_TASKS as EVAL_TASKS
from ._eval_tasks import write_eval_tasks as write_eval_tasks
from ._hf import TINY_HF_SHAPE as TINY_HF_SHAPE
from ._hf import TINY_QWEN3_5_SHAPE as TINY_QWEN3_5_SHAPE
from ._hf import hf_logits as hf_logits
from ._hf import tiny_hf_llama as tiny_hf_llama
from ._zoo import run_zoo as run_zoo
