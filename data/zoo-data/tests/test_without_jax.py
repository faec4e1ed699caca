"""zoo-data runs where JAX cannot be imported: `python -m zoo_data prepare`, `info` and `verify`
in a process whose every import of jax, jaxlib, equinox, optax or orbax raises ImportError, the
store checked against tokens computed here; and `import zoo_data` loads none of them."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

BLOCKED = ("jax", "jaxlib", "equinox", "optax", "orbax")

# Installed by `site` at start-up, before `-m zoo_data` or `-c` runs anything.
SITECUSTOMIZE = f"""
import sys


class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} may not be imported here")
        return None


sys.meta_path.insert(0, _Blocked())
"""


@pytest.fixture(scope="module")
def no_jax_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a subprocess in which importing any of ``BLOCKED`` raises."""
    site = tmp_path_factory.mktemp("site")
    (site / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE))
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "PYTHONWARNINGS": "ignore"}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=300
    )


def _random_texts(rng: np.random.Generator, count: int) -> list[str]:
    """Non-empty texts of ASCII, accented, CJK and astral characters (1 to 4 UTF-8 bytes)."""
    alphabet = [*"abc xyz\n\t.", "\u00e9", "\u00fc", "\u4e2d", "\u6587", "\U0001d11e"]
    return ["".join(rng.choice(alphabet, int(rng.integers(1, 120)))) for _ in range(count)]


def test_the_blocker_blocks(no_jax_env):
    # Without it the tests below would pass whatever zoo-data imports.
    for name in BLOCKED:
        proc = _run(no_jax_env, "-c", f"import {name}")
        assert proc.returncode == 1 and "may not be imported here" in proc.stderr, name


def test_prepare_info_verify_without_jax_give_the_byte_tokenizers_ids(no_jax_env, tmp_path):
    rng = np.random.default_rng()
    texts = _random_texts(rng, int(rng.integers(3, 12)))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, text in enumerate(texts):
        (corpus / f"doc{i:02d}.txt").write_text(text, encoding="utf-8")
    (corpus / "latin1.txt").write_bytes("caf\u00e9".encode("latin-1"))  # skipped, and said
    store = tmp_path / "store"
    args = ["-m", "zoo_data", "prepare", str(corpus), "--out", str(store), "--eval-fraction", "0"]
    proc = _run(no_jax_env, *args, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert f"prepared: {len(texts)} documents" in proc.stdout
    assert proc.stderr == (
        "zoo-data: skipped 1 binary or non-UTF-8 file(s) in the data "
        f"(e.g. {corpus / 'latin1.txt'})\n"
    )

    # The store read here with numpy alone: each document is its UTF-8 bytes, then EOS 256.
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["dtype"] == "uint16" and len(manifest["shards"]) == 1
    tokens = np.fromfile(store / "train" / "00000.tokens", np.uint16)
    starts = np.fromfile(store / "train" / "00000.starts", np.int64)
    docs = np.split(tokens, starts[1:])
    want = sorted([*t.encode("utf-8"), 256] for t in texts)
    assert sorted(d.tolist() for d in docs) == want

    proc = _run(no_jax_env, "-m", "zoo_data", "info", str(store), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["documents"] == len(texts) and summary["tokens"] == len(tokens)
    assert summary["tokens"] == sum(len(w) for w in want)

    proc = _run(no_jax_env, "-m", "zoo_data", "verify", str(store), "--no-progress")
    assert proc.returncode == 0 and "intact" in proc.stdout, proc.stderr
    shard = store / "train" / "00000.tokens"
    data = bytearray(shard.read_bytes())
    data[int(rng.integers(len(data)))] ^= 1
    shard.write_bytes(bytes(data))
    proc = _run(no_jax_env, "-m", "zoo_data", "verify", str(store), "--no-progress")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("zoo-data verify: error: The token store"), proc.stderr
    assert "train/00000.tokens" in proc.stderr


def test_import_zoo_data_loads_no_jax_equinox_optax_or_orbax():
    # A fresh interpreter with nothing blocked: what zoo-data's imports load on their own.
    code = (
        "import sys, zoo_data, zoo_data.cli, zoo_data.store, zoo_data.inputs; "
        f"print([m for m in sys.modules if m.split('.')[0] in {BLOCKED!r}])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_the_console_script_is_installed_and_runs_without_jax(no_jax_env):
    script = pathlib.Path(sys.executable).parent / "zoo-data"
    assert script.is_file(), "zoo-data is not installed here; run `make install`"
    proc = subprocess.run(
        [str(script), "--help"], env=no_jax_env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    for action in ("prepare", "info", "verify"):
        assert action in proc.stdout
