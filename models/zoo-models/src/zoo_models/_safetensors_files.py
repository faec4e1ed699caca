"""Reading and writing a directory of safetensors files, single or sharded with an index.

The layout is the Hugging Face one: ``model.safetensors``, or ``model-00001-of-0000N.safetensors``
shards plus ``model.safetensors.index.json`` (``{"metadata": {"total_size": ...},
"weight_map": {name: shard}}``). Tensors are numpy arrays (bfloat16 through ``ml_dtypes``).
"""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

__all__ = [
    "INDEX_FILE",
    "SINGLE_FILE",
    "TensorFiles",
    "parse_size",
    "write_tensor_files",
]

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def parse_size(size: int | str) -> int:
    """Bytes in ``size``: an int, or a string such as ``"5GB"`` (10^9) or ``"500MiB"`` (2^20)."""
    if isinstance(size, int) and not isinstance(size, bool):
        value = size
    elif isinstance(size, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]I?B|B)?\s*", size.upper())
        if m is None:
            raise ValueError(
                f"max_shard_size {size!r} is not a size; use bytes as an int or e.g. '5GB', '500MiB'."
            )
        value = int(float(m.group(1)) * _UNITS[m.group(2) or ""])
    else:
        raise ValueError(f"max_shard_size must be an int or a string such as '5GB', got {size!r}.")
    if value <= 0:
        raise ValueError(f"max_shard_size must be positive, got {size!r}.")
    return value


def _unreadable(file: pathlib.Path, error: Exception) -> ValueError:
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    return ValueError(
        f"{file} is truncated or not a safetensors file ({reason}); copy the checkpoint again."
    )


def _open(file: pathlib.Path) -> Any:  # safetensors' handle type is private
    """``safe_open`` with an empty, truncated or foreign file as one sentence."""
    try:
        return safe_open(file, framework="np")
    except SafetensorError as e:
        raise _unreadable(file, e) from None


class TensorFiles(Mapping[str, np.ndarray]):
    """The tensors of a checkpoint directory, read lazily by name.

    ``shape(name)`` reads only the header, so shapes can be checked before any data is read.
    """

    def __init__(self, directory: str | pathlib.Path) -> None:
        directory = pathlib.Path(directory)
        index = directory / INDEX_FILE
        single = directory / SINGLE_FILE
        if index.is_file():
            try:
                weight_map = json.loads(index.read_text())["weight_map"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{index} is not a safetensors index (no 'weight_map').") from e
            self._files = {name: directory / shard for name, shard in weight_map.items()}
            for shard in sorted(set(self._files.values())):
                if not shard.is_file():
                    raise ValueError(f"Shard {shard.name} named in {INDEX_FILE} is missing.")
        elif single.is_file():
            with _open(single) as f:
                self._files = dict.fromkeys(f.keys(), single)
        else:
            others = sorted(p.name for p in directory.glob("*.bin")) + sorted(
                p.name for p in directory.glob("*.pt")
            )
            hint = f" (found {', '.join(others)}; only safetensors are read)" if others else ""
            raise ValueError(f"{directory} has neither {SINGLE_FILE} nor {INDEX_FILE}{hint}.")
        self._open: dict[pathlib.Path, Any] = {}

    def _handle(self, name: str) -> Any:  # safetensors' handle type is private
        file = self._files[name]
        if file not in self._open:
            self._open[file] = _open(file)
        return self._open[file]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._files:
            raise KeyError(name)
        try:
            return self._handle(name).get_tensor(name)
        except SafetensorError as e:
            raise _unreadable(self._files[name], e) from None

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of tensor ``name`` from the file header."""
        if name not in self._files:
            raise KeyError(name)
        return tuple(self._handle(name).get_slice(name).get_shape())

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def write_tensor_files(
    directory: str | pathlib.Path,
    tensors: Mapping[str, np.ndarray],
    *,
    max_shard_size: int | str = "5GB",
) -> list[pathlib.Path]:
    """Write ``tensors`` as ``model.safetensors``, or as shards with an index when they exceed
    ``max_shard_size`` in total. Returns the files written.

    A tensor larger than the shard size gets a shard of its own. Stale files of the other
    layout are removed so the directory never holds two disagreeing checkpoints.
    """
    directory = pathlib.Path(directory)
    limit = parse_size(max_shard_size)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {name: np.ascontiguousarray(t) for name, t in tensors.items()}

    shards: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for name, t in arrays.items():
        if shards[-1] and size + t.nbytes > limit:
            shards.append({})
            size = 0
        shards[-1][name] = t
        size += t.nbytes

    for stale in [
        directory / INDEX_FILE,
        directory / SINGLE_FILE,
        *directory.glob("model-*-of-*.safetensors"),
    ]:
        stale.unlink(missing_ok=True)

    metadata = {"format": "pt"}  # transformers refuses safetensors files without it
    if len(shards) == 1:
        path = directory / SINGLE_FILE
        save_file(shards[0], path, metadata=metadata)
        return [path]
    written = []
    weight_map = {}
    for i, shard in enumerate(shards):
        path = directory / f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, path, metadata=metadata)
        written.append(path)
        weight_map.update(dict.fromkeys(shard, path.name))
    total = sum(t.nbytes for t in arrays.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX_FILE).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return [*written, directory / INDEX_FILE]
