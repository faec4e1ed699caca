"""zoo_train.testing: helpers for tests of zoo and of code built on it.

Tiny corpora (``write_corpus``), ``zoo`` in a subprocess (``run_zoo``) and tiny Hugging Face
checkpoints and tokenizers made on the spot (``tiny_hf_llama``, ``tiny_tokenizer``, ``hf_logits``;
these need torch, transformers and tokenizers, which zoo-train does not depend on).
"""

from ._corpus import WORDS as WORDS
from ._corpus import run_zoo as run_zoo
from ._corpus import write_corpus as write_corpus
from ._hf import CHAT_TEMPLATE as CHAT_TEMPLATE
from ._hf import SPECIALS as SPECIALS
from ._hf import TINY_HF_SHAPE as TINY_HF_SHAPE
from ._hf import hf_logits as hf_logits
from ._hf import tiny_hf_llama as tiny_hf_llama
from ._hf import tiny_tokenizer as tiny_tokenizer
