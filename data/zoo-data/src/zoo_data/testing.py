"""Small inputs for tests of code built on zoo-data: a corpus of pseudo-code, a BPE
``tokenizer.json`` with a chat template, and random token documents. Deterministic for a seed;
they need nothing beyond zoo-data's own dependencies."""

from __future__ import annotations

import json
import pathlib

import numpy as np

#: The corpus vocabulary of :func:`write_corpus` and :func:`tiny_tokenizer`.
WORDS = ("def", "return", "class", "import", "alpha", "beta", "gamma", "self", "value", "(x)")


def write_corpus(
    directory: pathlib.Path, *, files: int = 12, lines: int = 40, seed: int = 0
) -> pathlib.Path:
    """A directory of small text files of repetitive pseudo-code (easy to learn)."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        text = "\n".join(" ".join(rng.choice(WORDS, 8)) for _ in range(lines))
        (directory / f"doc{i:02d}.txt").write_text(text + "\n")
    return directory


# A ChatML-style template, as many instruction-tuned checkpoints ship in tokenizer_config.json.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: A conversation with a system prompt and two assistant replies, in ``messages`` form.
CHAT_MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "what is alpha?"},
    {"role": "assistant", "content": "beta gamma"},
    {"role": "user", "content": "and?"},
    {"role": "assistant", "content": "return self"},
]
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


def random_docs(
    seed: int, n: int = 40, vocab: int = 64, lo: int = 3, hi: int = 40
) -> list[np.ndarray]:
    """``n`` random documents, each int32 ``[L]`` with ``lo + 1 <= L <= hi``: ids below
    ``vocab - 1``, then EOS ``vocab - 1``."""
    rng = np.random.default_rng(seed)
    return [
        np.append(rng.integers(0, vocab - 1, rng.integers(lo, hi)), vocab - 1).astype(np.int32)
        for _ in range(n)
    ]


def swap_tokens(path: pathlib.Path, rng: np.random.Generator, lo: int = 0, hi: int = -1) -> int:
    """Swap two different token ids of ``path`` (uint16) between items ``lo`` and ``hi``: every
    id stays in range and the size is unchanged. Returns the first item's byte offset."""
    ids = np.fromfile(path, np.uint16)
    hi = len(ids) if hi < 0 else hi
    while True:
        i, j = sorted(rng.choice(np.arange(lo, hi), 2, replace=False).tolist())
        if ids[i] != ids[j]:
            break
    ids[i], ids[j] = ids[j], ids[i]
    ids.tofile(path)
    return 2 * i


def strip_hashes(store: pathlib.Path) -> None:
    """Make ``store`` what an older zoo wrote: a manifest without block hashes (nor its own
    checksum, which came later still)."""
    manifest = json.loads((store / "manifest.json").read_text())
    del manifest["blocks"]
    manifest.pop("manifest_sha256", None)
    for shard in manifest["shards"]:
        for record in shard["files"]:
            del record["blocks"]
    (store / "manifest.json").write_text(json.dumps(manifest))
