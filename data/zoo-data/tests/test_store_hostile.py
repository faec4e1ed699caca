"""The hostile pass over the token store: a prepare never writes over, around or into its own
inputs, the filesystem root or a system directory, and never reads its own output back in; a
manifest is not believed (an edited dtype, count or shard name is refused by `verify`, `info`
and a reader, whatever the hashes say); a directory of shards without its manifest is no store."""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil

import numpy as np
import pytest

from zoo_data import DocumentStream, TokenStore, prepare_store
from zoo_data.cli import main
from zoo_data.store import verify_store
from zoo_data.store._format import content_fingerprint
from zoo_data.store._manifest import CHECKSUM, manifest_checksum
from zoo_data.testing import write_corpus


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A small intact store, copied by each test that edits it."""
    root = tmp_path_factory.mktemp("hostile-store")
    write_corpus(root / "corpus", files=6, lines=20, seed=int(np.random.default_rng().integers(99)))
    prepare_store(root / "corpus", root / "store", workers=1, progress=False)
    return root / "store"


def _files(directory: pathlib.Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def _error(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"zoo-data {command}: error: ") and err.endswith("."), err
    return err


@pytest.mark.parametrize(
    ("source", "out", "said"),
    [
        ("corpus", "corpus", "--out 'corpus' is the input 'corpus'"),
        ("corpus/doc00.txt", "corpus/doc00.txt", "is the input 'corpus/doc00.txt'"),
        ("corpus", "corpus/doc00.txt", "lies inside the input 'corpus'"),
        ("corpus", "corpus/store", "lies inside the input 'corpus'"),
        ("corpus", ".", "--out '.' contains the input 'corpus'"),
        ("corpus/*.txt", "corpus/doc01.txt", "is the input 'corpus/doc01.txt'"),
    ],
)
def test_prepare_never_writes_over_around_or_into_its_inputs(
    tmp_path, monkeypatch, capsys, source, out, said
):
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "corpus", files=3, lines=4)
    before = _files(tmp_path)
    assert main(["prepare", source, "--out", out, "--overwrite", "--no-progress"]) == 2
    assert said in _error(capsys, "prepare")
    assert _files(tmp_path) == before  # every input as it was, nothing added


def test_prepare_refuses_the_filesystem_root_and_system_directories(tmp_path, capsys):
    write_corpus(tmp_path / "corpus", files=2, lines=3)
    for out, said in (("/", "is the filesystem root"), ("/proc", "is a system directory"),
                      ("/etc/zoo-store", "is a system directory")):  # fmt: skip
        assert main(["prepare", str(tmp_path / "corpus"), "--out", out, "--no-progress"]) == 2
        assert f"--out {out!r} {said}" in _error(capsys, "prepare")
    assert not pathlib.Path("/etc/zoo-store").exists()


def test_a_glob_never_reads_the_store_it_writes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "corpus", files=4, lines=5)
    argv = ["prepare", "corpus/*", "--out", "corpus/store", "--eval-fraction", "0", "--no-progress"]
    assert main([*argv, "--workers", "1"]) == 0
    assert "4 documents" in capsys.readouterr().out
    # Run again: the store's own manifest and tokenizer are not taken in as documents.
    assert main(argv) == 0
    assert "is up to date (4 documents" in capsys.readouterr().out
    assert len(DocumentStream("corpus/*", exclude=["corpus/store"]).files) == 4


def _edited(
    store: pathlib.Path, where: pathlib.Path, edit, *, rehash: bool = False
) -> pathlib.Path:
    """A copy of ``store`` with its manifest edited; ``rehash``: its fingerprint and checksum
    recomputed, as a forger would."""
    copy = pathlib.Path(shutil.copytree(store, where))
    manifest = json.loads((copy / "manifest.json").read_text())
    edit(manifest)
    if rehash:
        manifest["fingerprint"] = content_fingerprint(manifest)
        manifest[CHECKSUM] = manifest_checksum(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def _dtype(m: dict) -> None:
    m["dtype"] = "uint8"


def _wider(m: dict) -> None:
    m["dtype"] = "uint32"


def _counts(m: dict) -> None:
    m["splits"]["train"]["tokens"] = 10**15
    m["splits"]["train"]["documents"] = 10**9


def _sources(m: dict) -> None:
    m["sources"][0]["bytes"] += 1


def _escape(m: dict) -> None:
    m["shards"][0]["files"][0]["name"] = "../../../../../../../etc/hostname"


@pytest.mark.parametrize(
    ("edit", "rehash", "said"),
    [
        (_dtype, False, "its token dtype 'uint8' is not uint16 or uint32"),
        (_wider, False, "its content does not give its fingerprint"),
        (_wider, True, " x 4 its counts and dtype say"),  # forged hashes: the files' sizes tell
        (_counts, False, "does not give its manifest_sha256"),
        (_counts, True, "and its shards hold"),
        (_sources, False, "does not give its manifest_sha256"),
        (_escape, False, "could lie outside the store"),
        (_escape, True, "could lie outside the store"),
    ],
)
def test_an_edited_manifest_is_refused_by_verify_info_and_the_reader(
    store, tmp_path, capsys, edit, rehash, said
):
    edited = _edited(store, tmp_path / "edited", edit, rehash=rehash)
    for command in ("verify", "info"):
        assert main([command, str(edited)]) == 2
        err = _error(capsys, command)
        assert "manifest.json' was edited or damaged" in err and said in err, err
    with pytest.raises(ValueError, match="was edited or damaged"):
        TokenStore(edited)
    with pytest.raises(ValueError, match="was edited or damaged"):
        verify_store(edited, progress=False)


def test_a_manifest_that_is_not_json_names_its_file(store, tmp_path, capsys):
    copy = pathlib.Path(shutil.copytree(store, tmp_path / "copy"))
    (copy / "manifest.json").write_text('{"format": "zoo-token-store", ')
    assert main(["verify", str(copy)]) == 2
    assert f"{str(copy / 'manifest.json')!r} is not valid JSON" in _error(capsys, "verify")


def test_an_intact_store_still_verifies_and_its_manifest_hash_covers_it_all(store, capsys):
    assert main(["verify", str(store), "--no-progress"]) == 0
    manifest = json.loads((store / "manifest.json").read_text())
    content = {k: v for k, v in manifest.items() if k != CHECKSUM}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    assert manifest[CHECKSUM] == digest


def test_shards_without_their_manifest_are_no_store(store, tmp_path, capsys):
    copy = pathlib.Path(shutil.copytree(store, tmp_path / "orphan"))
    (copy / "manifest.json").unlink()
    with pytest.raises(ValueError, match=r"holds a token store's shard files .* but no manifest"):
        DocumentStream(copy)
    assert main(["prepare", str(copy), "--out", str(tmp_path / "again"), "--no-progress"]) == 2
    assert "so it is not a token store" in _error(capsys, "prepare")
