"""Tiny Hugging Face checkpoints and tokenizers, built on the spot (no download).

torch, transformers and tokenizers are test tools, not dependencies of zoo-train: each helper
imports what it uses when called.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

from ._corpus import WORDS

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")


def tiny_tokenizer(
    directory: pathlib.Path, *, vocab_size: int = 256, add_bos: bool = True
) -> pathlib.Path:
    """A BPE ``tokenizer.json`` (Metaspace, as sentencepiece-style checkpoints) trained on the
    corpus words, with ``<unk>=0, <s>=1, </s>=2``, a BOS-adding post-processor when ``add_bos``,
    and a ``tokenizer_config.json`` carrying a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS))
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, 8)) for _ in range(200)]
    lines += ["user assistant system: hello, what is 1 + 2? The answer is 3.\n"]
    tok.train_from_iterator(lines, trainer)
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
        )
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "add_bos_token": add_bos,
        "chat_template": CHAT_TEMPLATE,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return directory


#: The shape of the tiny Hugging Face checkpoints the tests build (the tiny tokenizer's vocabulary).
TINY_HF_SHAPE = dict(
    vocab_size=256,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def tiny_hf_llama(
    directory: pathlib.Path, *, seed: int = 0, tokenizer: bool = True, dtype: str = "float32"
) -> pathlib.Path:
    """A random Hugging Face ``LlamaForCausalLM`` (vocab 256) saved with ``save_pretrained``,
    in ``dtype``, with :func:`tiny_tokenizer` beside it unless ``tokenizer=False``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        **TINY_HF_SHAPE,
        bos_token_id=1,
        eos_token_id=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).to(getattr(torch, dtype)).save_pretrained(directory)
    if tokenizer:
        tiny_tokenizer(directory)
    return directory


def hf_logits(directory: pathlib.Path, ids: np.ndarray) -> np.ndarray:
    """Logits of the Hugging Face model in ``directory`` (transformers, float32)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(torch.as_tensor(ids, dtype=torch.long)).logits.numpy()
