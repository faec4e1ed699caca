"""Every `zoo` command, given a hostile input of each kind, ends with its exit code (see
`zoo_train.cli._exit`) and one line on stderr naming what to change, never a traceback; a
training command that is refused leaves nothing behind in its output directory."""

from __future__ import annotations

import gzip
import json
import os
import pathlib

import jax
import pytest
import zstandard

import zoo_models
from zoo_train.checkpoint import LOCK_FILE
from zoo_train.cli import main
from zoo_train.testing import write_corpus

USAGE, DOES_NOT_FIT = 2, 3
# A file every Linux host has that no one, root included, may read.
_WRITE_ONLY = "/sys/bus/pci/rescan"


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> pathlib.Path:
    """A corpus, a tiny Hugging Face model, damaged copies of it, a run directory with no
    checkpoint yet and hostile config files."""
    root = tmp_path_factory.mktemp("hostile")
    write_corpus(root / "corpus", files=3, lines=5)
    (root / "empty").mkdir()
    tokenizer = zoo_models.ByteTokenizer()
    config = zoo_models.get("llama-tiny").replace(
        vocab_size=tokenizer.vocab_size, n_layers=1, d_model=16, mlp_hidden=32
    )
    hf = root / "hf"
    zoo_models.save_hf(zoo_models.build(config, key=jax.random.key(0)), hf, tokenizer=tokenizer)
    damages = {
        "bad_tokenizer": lambda d: (d / "tokenizer.json").write_text("{ not json"),
        "bad_tokenizer_config": lambda d: (d / "tokenizer_config.json").write_text("{'x': 1}"),
        "latin1_config": lambda d: (d / "config.json").write_bytes(b'{"model_type": "\xe9"}'),
        "negative_width": lambda d: _edit_config(d, hidden_size=-16),
        "bad_heads": lambda d: _edit_config(d, num_key_value_heads=3),
        "bad_eps": lambda d: _edit_config(d, rms_norm_eps=float("nan")),
        "huge": lambda d: _edit_config(d, num_hidden_layers=10**7),
    }
    for name, damage in damages.items():
        copy = root / name
        copy.mkdir()
        for f in hf.iterdir():
            (copy / f.name).write_bytes(f.read_bytes())
        damage(copy)
    (root / "pending").mkdir()  # a run that has not saved yet: its lock file alone
    (root / "pending" / LOCK_FILE).write_text("")
    (root / "latin1.toml").write_bytes(b'steps = "\xff"\n')
    (root / "list.json").write_text("[1, 2]")
    (root / "bad.toml").write_text("steps = \n")
    (root / "a_file").write_text("not a directory")
    # Data files that are found but cannot be read: EIO, EACCES (read as root too), a FIFO
    # named directly, compressed files that end early or are not what they say.
    (root / "proc").mkdir()
    os.symlink("/proc/self/mem", root / "proc" / "mem")
    (root / "sysfs").mkdir()
    os.symlink(_WRITE_ONLY, root / "sysfs" / "rescan")
    os.mkfifo(root / "fifo")
    lines = b"".join(b'{"text": "line %d"}\n' % i for i in range(2000))
    (root / "cut.jsonl.gz").write_bytes(gzip.compress(lines)[:-40])
    # Configs that nest past any use, expand without end, or say a key twice.
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (root / "nested.json").write_text('{"model_config": {"x": ' + "[" * 40 + "]" * 40 + "}}")
    (root / "bomb.yaml").write_text(_alias_bomb())
    (root / "small_bomb.yaml").write_text(_alias_bomb(4))  # under the cap: its error is short
    (root / "twice.yaml").write_text("steps: 2\nbatch_size: 4\nsteps: 3\n")
    (root / "twice.json").write_text('{"steps": 2, "steps": 3}')
    # A store whose manifest is not JSON, and shards whose manifest is gone.
    (root / "badstore" / "train").mkdir(parents=True)
    (root / "badstore" / "manifest.json").write_text('{"format": ')
    (root / "orphan" / "train").mkdir(parents=True)
    (root / "orphan" / "train" / "00000.tokens").write_bytes(b"\0" * 64)
    (root / "prompts.jsonl").write_text('{"prompt": "alpha beta", "answer": "1"}\n')
    (root / "cut.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(lines)[:-40])
    (root / "not.txt.zst").write_bytes(b"plain text, not zstd")
    return root


def _alias_bomb(levels: int = 10) -> str:
    """YAML whose anchors each list the one before nine times under `data:`: a few lines,
    9**(levels + 1) values."""
    lines = ["data:", "- &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"- &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append("- [" + ", ".join([f"*a{levels - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _edit_config(directory: pathlib.Path, **changes: object) -> None:
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, **changes}))


TRAIN = ["train", "--data", "corpus", "--out", "out", "--steps", "2", "--no-progress"]
FINETUNE = ["finetune", "--from-hf", "hf", "--data", "corpus", "--out", "out", "--steps", "2"]

# (command line, exit code, what the sentence must say). Paths are relative to `place`.
CASES = [
    # Bad flags and values of every kind, refused before anything is loaded.
    (["train", "--no-such-flag"], USAGE, "--no-such-flag"),
    ([*TRAIN, "--steps", "many"], USAGE, "'many'"),
    ([*TRAIN, "--steps", "0"], USAGE, "`steps` (--steps) must be in [1, 2147483647], got 0"),
    ([*TRAIN, "--batch-size", "-4"], USAGE, "`batch_size` (--batch-size) must be at least 1"),
    ([*TRAIN, "--lr", "inf"], USAGE, "`lr` must be a finite number"),
    ([*TRAIN, "--lr", "-0.1"], USAGE, "`lr` (--lr) must be greater than 0"),
    ([*TRAIN, "--set", "z_loss=nan"], USAGE, "`z_loss` must be a finite number"),
    ([*TRAIN, "--set", "optimizer.weight_decay=nan"], USAGE, "`optimizer.weight_decay`"),
    ([*TRAIN, "--set", "optimizer.b1=5"], USAGE, "`optimizer.b1` must be in [0, 1), got 5.0"),
    ([*TRAIN, "--set", "optimizer.b2=1"], USAGE, "`optimizer.b2` must be in [0, 1)"),
    ([*TRAIN, "--set", "optimizer.eps=-1"], USAGE, "`optimizer.eps` must be greater than 0"),
    ([*TRAIN, "--set", "optimizer.momentum=-3"], USAGE, "`optimizer.momentum`"),
    ([*TRAIN, "--set", "temperature=-1"], USAGE, "`temperature` must be greater than 0"),
    ([*TRAIN, "--set", "temperature=nan"], USAGE, "`temperature` must be a finite number"),
    ([*TRAIN, "--sample-tokens", "-3"], USAGE, "(--sample-tokens) must be at least 0"),
    ([*TRAIN, "--max-bytes", "0"], USAGE, "(--max-bytes) must be at least 1"),
    ([*TRAIN, "--seed", "-1"], USAGE, "(--seed) must be in [0, 4294967296)"),
    ([*TRAIN, "--set", "keep=0"], USAGE, "`keep` must be at least 1"),
    ([*TRAIN, "--set", "val_fraction=1"], USAGE, "`val_fraction` must be in [0, 1)"),
    ([*TRAIN, "--set", "optimizer.nope=1"], USAGE, "Unknown setting `optimizer.nope`"),
    ([*TRAIN, "--data-weights", "-1"], USAGE, "must hold numbers greater than 0, got -1.0"),
    ([*TRAIN, "--set", "model_config.d_model=-5"], USAGE, "`d_model` must be a positive int"),
    ([*TRAIN, "--model", "llama-huge"], USAGE, "Unknown model preset 'llama-huge'"),
    ([*TRAIN, "--mesh", "data=2"], USAGE, "cannot use 1 device: the fixed axes take 2"),
    ([*TRAIN, "--mesh", "data=1,fsdp=3"], USAGE, "needs 3 devices but 1 is available"),
    ([*TRAIN, "--attention-implementation", "warp"], USAGE, "'warp' is not an installed kernel"),
    ([*TRAIN, "--config", "latin1.toml"], USAGE, "latin1.toml"),
    ([*TRAIN, "--config", "list.json"], USAGE, "must hold a table of settings"),
    ([*TRAIN, "--config", "bad.toml"], USAGE, "'bad.toml' is not valid"),
    ([*TRAIN, "--config", "nowhere.toml"], USAGE, "does not exist"),
    (["train", "--data", "nowhere", "--out", "out"], USAGE, "does not exist"),
    (["train", "--data", "empty", "--out", "out"], USAGE, "empty"),
    ([*TRAIN[:2], "proc", *TRAIN[3:]], USAGE,
     "Cannot read the data file 'proc/mem' (a link to /proc/self/mem): input/output error"),
    ([*TRAIN[:2], "sysfs", *TRAIN[3:]], USAGE,
     f"Cannot read the data file 'sysfs/rescan' (a link to {_WRITE_ONLY}): permission denied"),
    ([*TRAIN[:2], "fifo", *TRAIN[3:]], USAGE, "'fifo' is a FIFO (named pipe), not a file"),
    ([*TRAIN[:2], "cut.txt.zst", *TRAIN[3:]], USAGE,
     "Cannot read the data file 'cut.txt.zst': the zstd file ends inside a frame"),
    ([*TRAIN, "--set", "model_config.n_layers=100000000"], DOES_NOT_FIT, "parameters"),
    ([*TRAIN, "--out", "a_file"], USAGE, "a_file"),
    ([*FINETUNE, "--lora-rank", "-2"], USAGE, "`lora.rank` (--lora-rank) must be at least 0"),
    ([*FINETUNE, "--lora-alpha", "0"], USAGE, "`lora.alpha` (--lora-alpha) must be greater"),
    ([*FINETUNE, "--model", "llama-tiny"], USAGE, "drop --model"),
    (["finetune", "--from-hf", "nowhere", "--data", "corpus", "--out", "out"], USAGE, "nowhere"),
    (["finetune", "--from-run", "pending", "--data", "corpus", "--out", "out"], USAGE,
     "'pending' is a zoo run with no checkpoint yet"),
    (["finetune", "--from-hf", "bad_tokenizer", "--data", "corpus", "--out", "out"], USAGE,
     "bad_tokenizer/tokenizer.json is not a readable tokenizer.json"),
    (["finetune", "--from-hf", "huge", "--data", "corpus", "--out", "out"], DOES_NOT_FIT,
     "huge/config.json describes a model of"),
    ([*FINETUNE, "--export-hf", "a_file"], USAGE, "'a_file' is a file"),
    # Using a model: sampling and evaluation settings, sources that hold no model.
    (["generate", "hf", "--num-samples", "0", "--temperature", "-1"], USAGE,
     "--num-samples: must be at least 1, got 0"),
    (["generate", "hf", "--temperature", "nan"], USAGE, "--temperature: must be greater than 0"),
    (["generate", "hf", "--max-new-tokens", "0"], USAGE, "--max-new-tokens: must be at least 1"),
    (["generate", "hf", "--top-p", "1.5"], USAGE, "--top-p: must be in (0, 1]"),
    (["generate", "hf", "--top-k", "0"], USAGE, "--top-k: must be at least 1"),
    (["generate", "pending"], USAGE, "'pending' is a zoo run with no checkpoint yet"),
    (["generate", "nowhere"], USAGE, "'nowhere' does not exist"),
    (["generate", "corpus"], USAGE, "neither a zoo run directory"),
    (["generate", "bad_tokenizer"], USAGE, "bad_tokenizer/tokenizer.json is not a readable"),
    (["generate", "bad_tokenizer_config"], USAGE,
     "bad_tokenizer_config/tokenizer_config.json is not readable JSON"),
    (["generate", "latin1_config"], USAGE, "latin1_config/config.json is not valid JSON"),
    (["generate", "negative_width"], USAGE,
     "negative_width/config.json: `hidden_size` must be a positive int, got -16"),
    (["generate", "bad_heads"], USAGE,
     "`num_attention_heads` (4) must be a multiple of `num_key_value_heads` (3)"),
    (["generate", "bad_eps"], USAGE, "`rms_norm_eps` must be a positive number, got nan"),
    (["generate", "huge"], DOES_NOT_FIT, "parameters"),
    (["eval", "hf", "--seq-len", "0"], USAGE, "--seq-len: must be at least 1"),
    (["eval", "hf", "--batch-size", "x"], USAGE, "--batch-size: expected an integer, got 'x'"),
    (["eval", "hf", "--val-fraction", "2"], USAGE, "--val-fraction: must be in [0, 1)"),
    (["eval", "hf", "--data", "nowhere"], USAGE, "does not exist"),
    (["eval", "hf", "--data", "cut.jsonl.gz"], USAGE,
     "Cannot read the data file 'cut.jsonl.gz': compressed file ended before the end"),
    (["eval", "pending"], USAGE, "no checkpoint yet"),
    (["convert", "pending", "x"], USAGE, "'pending' is a zoo run with no checkpoint yet"),
    (["convert", "hf", "a_file"], USAGE, "'a_file' is a file"),
    (["convert", "hf", "corpus"], USAGE, "'corpus' exists and is not empty"),
    (["convert", "negative_width", "x"], USAGE, "`hidden_size` must be a positive int"),
    # The rest of the table.
    (["compile", "--topology", "v5e:2x2", "--set", "optimizer.b1=2"], USAGE, "`optimizer.b1`"),
    (["profile", "nowhere"], USAGE, "nowhere"),
    (["profile", "corpus", "--top", "0"], USAGE, "--top: must be at least 1"),
    (["profile"], USAGE, "Give one trace to read"),
    (["models", "extra"], USAGE, "Unrecognized arguments: extra"),
    (["kernels", "verify", "warp"], USAGE, "Unknown kernel 'warp'"),
    (["kernels", "explain"], USAGE, "invalid choice: 'explain'"),
    (["data", "info", "nowhere"], USAGE, "'nowhere' is not a token store"),
    (["metrics", "nowhere", "--to", "tensorboard"], USAGE, "nowhere"),
    (["metrics", "pending", "--to", "tensorboard"], USAGE, "pending"),
    (["metrics", "corpus", "--to", "mlflow"], USAGE, "invalid choice: 'mlflow'"),
    ([*TRAIN, "--tracker", "mlflow"], USAGE, "mlflow"),
    ([*TRAIN[:5], "--epochs", "0"], USAGE, "`epochs` (--epochs) must be greater than 0"),
    ([*TRAIN[:5], "--epochs", "nan"], USAGE, "`epochs` must be a finite number"),
    ([*TRAIN, "--epochs", "1"], USAGE, "Pass --steps or --epochs, not both"),
    ([*FINETUNE, "--objective", "dpo"], USAGE, "trains on preference pairs, but 'corpus'"),
    ([*FINETUNE, "--objective", "kto"], USAGE, "--objective must be one of"),
    ([*FINETUNE, "--beta", "nan"], USAGE, "`beta` must be a finite number"),
    ([*FINETUNE, "--simpo-gamma", "-1"], USAGE, "`simpo_gamma` (--simpo-gamma) must be at least 0"),
    (["generate", "hf", "--system", "be brief"], USAGE, "--system is a chat message; add --chat"),
    (["data", "prepare", "nowhere", "--out", "store"], USAGE, "'nowhere' does not exist"),
    (["data", "prepare", "proc", "--out", "store"], USAGE,
     "Cannot read the data file 'proc/mem' (a link to /proc/self/mem): input/output error"),
    (["data", "prepare", "sysfs", "--out", "store"], USAGE, "'sysfs/rescan' (a link to"),
    (["data", "prepare", "fifo", "--out", "store"], USAGE, "'fifo' is a FIFO"),
    (["data", "prepare", "not.txt.zst", "--out", "store"], USAGE,
     "Cannot read the data file 'not.txt.zst': not valid zstd data"),
    (["data", "prepare", "corpus", "--out", "store", "--workers", "0"], USAGE, "at least 1"),
    # The hostile pass: outputs over, around or inside inputs, the root, system directories.
    (["data", "prepare", "corpus", "--out", "corpus", "--overwrite"], USAGE,
     "--out 'corpus' is the input 'corpus'"),
    (["data", "prepare", "corpus/doc00.txt", "--out", "corpus/doc00.txt", "--overwrite"], USAGE,
     "is the input 'corpus/doc00.txt'"),
    (["data", "prepare", "corpus", "--out", "corpus/store", "--overwrite"], USAGE,
     "lies inside the input 'corpus'"),
    (["train", "--data", "corpus", "--out", "/", "--steps", "2"], USAGE,
     "--out '/' is the filesystem root; write into a directory of your own instead"),
    (["train", "--data", "corpus", "--out", "/proc", "--steps", "2"], USAGE,
     "--out '/proc' is a system directory"),
    (["train", "--data", "corpus", "--out", "corpus/run", "--steps", "2"], USAGE,
     "--out 'corpus/run' lies inside the input 'corpus'"),
    ([*FINETUNE, "--export-hf", "hf/merged"], USAGE, "--export-hf 'hf/merged' lies inside"),
    (["convert", "hf", "hf/run"], USAGE, "DST 'hf/run' lies inside the input 'hf'"),
    (["eval", "hf", "--tasks", "t", "--output", "hf/config.json"], USAGE,
     "--output 'hf/config.json' lies inside the input 'hf'"),
    (["eval", "hf", "--tasks", "t", "--output", "corpus"], USAGE,
     "--output 'corpus' is a directory; pass the path of a file to write"),
    (["eval", "hf", "--data-cache", "hf"], USAGE, "--data-cache 'hf' is the input 'hf'"),
    (["compile", "--topology", "v5e:2x2", "--json", "corpus"], USAGE,
     "--json 'corpus' is a directory"),
    # A store's manifest is checked; shards without one are no store.
    (["data", "info", "badstore"], USAGE, "'badstore/manifest.json' is not valid JSON"),
    ([*TRAIN[:2], "badstore", *TRAIN[3:]], USAGE, "'badstore/manifest.json' is not valid JSON"),
    ([*TRAIN[:2], "orphan", *TRAIN[3:]], USAGE,
     "'orphan' holds a token store's shard files (train/00000.tokens) but no manifest.json"),
    # Configs: nesting, alias expansion and keys given twice, refused in a short sentence.
    ([*TRAIN, "--config", "deep.json"], USAGE, "nests values more than 16 levels deep"),
    ([*TRAIN, "--config", "nested.json"], USAGE, "nests values more than 16 levels deep"),
    ([*TRAIN, "--config", "bomb.yaml"], USAGE, "holds more than 100,000 values"),
    ([*TRAIN, "--config", "small_bomb.yaml"], USAGE,  # the value cut to 120 characters
     "Setting `data` must be a list of strings, got [['x', 'x', 'x', 'x', ...], [['x', 'x', "
     "'x', 'x', ...], ['x', 'x', 'x', 'x', ...], ['x', 'x', 'x', 'x', ...], ['x', 'x'…."),
    ([*TRAIN, "--config", "twice.yaml"], USAGE, "gives `steps` twice in one table (line 3)"),
    ([*TRAIN, "--config", "twice.json"], USAGE, "gives `steps` twice in one table; keep one"),
    # Sizes: refused before anything is allocated.
    ([*TRAIN[:5], "--steps", "1000000000000", "--stop-at", "1"], USAGE,
     "`steps` (--steps) must be in [1, 2147483647], got 1000000000000"),
    ([*TRAIN, "--batch-size", "1000000000"], DOES_NOT_FIT,
     "A step's batch of 1,000,000,000 rows of 128 tokens needs at least"),
    (["finetune", "--from-hf", "hf", "--objective", "grpo", "--data", "prompts.jsonl", "--out",
      "out", "--reward", "answer_match", "--steps", "2", "--num-generations", "1000000000",
      "--batch-size", "1000000000"], DOES_NOT_FIT,
     "A step's batch of 1,000,000,000 rows of 511 tokens needs at least"),
    # Objectives zoo compile does not compile.
    (["compile", "--topology", "v5e:2x2", "--objective", "grpo"], USAGE,
     "drop --objective grpo"),
    (["compile", "--topology", "v5e:2x2", "--objective", "kto"], USAGE,
     "--objective must be one of sft, dpo, ipo, simpo, orpo, grpo, distill; got 'kto'"),
    (["data", "prepare", "corpus", "--out", "store", "--eval-fraction", "nan"], USAGE, "[0, 1)"),
]  # fmt: skip


def _id(case: tuple) -> str:
    return " ".join(case[0])[:60]


@pytest.mark.parametrize(("argv", "code", "needle"), CASES, ids=[_id(c) for c in CASES])
def test_each_command_refuses_hostile_input_in_one_sentence(
    place, monkeypatch, capsys, argv, code, needle
):
    if "sysfs" in argv and not os.path.exists(_WRITE_ONLY):
        pytest.skip(f"this host has no {_WRITE_ONLY}")
    monkeypatch.chdir(place)
    before = sorted(os.listdir(place))
    try:
        got = main(argv)
    except SystemExit as e:  # argparse's own refusals
        got = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    # Notes may come before it (the model being loaded); the error is the last line, and one.
    assert err and err[-1].startswith(f"zoo {argv[0]}: error: ") and err[-1].endswith("."), err
    assert needle in err[-1], err[-1]
    assert got == code, err
    assert sorted(os.listdir(place)) == before  # nothing left behind: no `out` with a lock in it


@pytest.mark.parametrize(
    ("command", "message", "said"),
    [
        ("eval", "RESOURCE_EXHAUSTED: Out of memory allocating 21427462544 bytes.",
         "an allocation of 20.0 GiB failed ("),
        ("generate", "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2147483648 bytes.",
         "an allocation of 2.0 GiB failed ("),
        ("train", "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in "
         "memory space hbm. Used 30.63G of 15.75G hbm. Exceeded hbm capacity by 14.88G.",
         "the program needs 30.63GB of 15.75GB of HBM; lower --batch-size"),
    ],
)  # fmt: skip
def test_out_of_memory_from_each_backend_is_one_sentence(capsys, command, message, said):
    # XLA's wording differs by backend (CPU, GPU, TPU); each becomes the sizes and what to
    # lower, exit 3. The CPU one is raised for real in test_cli_errors.
    from zoo_train.cli._exit import EXIT_DOES_NOT_FIT, run_command

    def body() -> int:
        raise jax.errors.JaxRuntimeError(message)

    assert run_command(command, body) == EXIT_DOES_NOT_FIT
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"zoo {command}: error: Out of memory: ") and said in line, line


def test_the_exit_code_table_agrees_with_the_watchdog():
    from zoo_train.cli import _exit
    from zoo_train.parallel import EXIT_PEER_LOST

    assert _exit.EXIT_PEER_LOST == EXIT_PEER_LOST == 4
    assert (_exit.EXIT_FAILED, _exit.EXIT_USAGE, _exit.EXIT_DOES_NOT_FIT) == (1, 2, 3)
