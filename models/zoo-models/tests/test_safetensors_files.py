"""The safetensors directory layer: single file, shards with an index, sizes."""

from __future__ import annotations

import json
import re

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file

from zoo_models._safetensors_files import TensorFiles, parse_size, write_tensor_files


def _tensors(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "a.weight": rng.normal(size=(16, 8)).astype(np.float32),
        "b.weight": rng.normal(size=(32,)).astype(ml_dtypes.bfloat16),
        "c.bias": rng.integers(0, 9, size=(3, 5)).astype(np.int32),
        "d.weight": rng.normal(size=(64, 4)).astype(np.float16),
    }


def test_single_file_round_trip(tmp_path) -> None:
    tensors = _tensors(np.random.default_rng(0))
    written = write_tensor_files(tmp_path, tensors)
    assert [p.name for p in written] == ["model.safetensors"]
    files = TensorFiles(tmp_path)
    assert set(files) == set(tensors)
    for name, t in tensors.items():
        assert files.shape(name) == t.shape
        assert files[name].dtype == t.dtype
        np.testing.assert_array_equal(files[name], t)


def test_sharded_round_trip(tmp_path) -> None:
    tensors = _tensors(np.random.default_rng(1))
    written = write_tensor_files(tmp_path, tensors, max_shard_size=600)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1
    assert len(written) == len(shards) + 1
    assert index["metadata"]["total_size"] == sum(t.nbytes for t in tensors.values())
    # Each shard respects the limit unless it holds a single oversized tensor.
    for shard in shards:
        content = load_file(tmp_path / shard)
        size = sum(t.nbytes for t in content.values())
        assert size <= 600 or len(content) == 1
        for name in content:
            assert index["weight_map"][name] == shard
    files = TensorFiles(tmp_path)
    for name, t in tensors.items():
        np.testing.assert_array_equal(files[name], t)
    # Writing again unsharded removes the stale shards and index.
    write_tensor_files(tmp_path, tensors)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


def test_parse_size() -> None:
    assert parse_size("5GB") == 5 * 10**9
    assert parse_size("500MiB") == 500 * 2**20
    assert parse_size("1.5kb") == 1500
    assert parse_size(123) == 123
    for bad in ["lots", "-1MB", 0, "5 XB"]:
        with pytest.raises(ValueError, match="max_shard_size"):
            parse_size(bad)


def test_missing_files(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"model\.safetensors"):
        TensorFiles(tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ValueError, match=r"pytorch_model\.bin"):
        TensorFiles(tmp_path)
    write_tensor_files(tmp_path, _tensors(np.random.default_rng(2)), max_shard_size=600)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    lost = sorted(set(index["weight_map"].values()))[1]
    (tmp_path / lost).unlink()
    with pytest.raises(ValueError, match=re.escape(lost)):
        TensorFiles(tmp_path)


def test_a_full_disk_is_an_os_error_naming_the_file(tmp_path) -> None:
    # safetensors raises its own SafetensorError for I/O; storage handling needs the OSError.
    import errno
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)])
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        tensors = {"w": np.random.default_rng().standard_normal((256, 256), dtype=np.float32)}
        with pytest.raises(OSError, match="No space left on device") as raised:
            write_tensor_files(disk / "model", tensors)
        assert raised.value.errno == errno.ENOSPC
        assert raised.value.filename == str(disk / "model" / "model.safetensors")
    finally:
        subprocess.run(["umount", str(disk)], check=True)
