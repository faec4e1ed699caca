"""Reading and writing a directory of safetensors files, single or sharded with an index.

The layout is the Hugging Face one: ``model.safetensors``, or ``model-00001-of-0000N.safetensors``
shards plus ``model.safetensors.index.json`` (``{"metadata": {"total_size": ...},
"weight_map": {name: shard}}``). Tensors are numpy arrays (bfloat16 through ``ml_dtypes``).
"""

from __future__ import annotations

import json
import os
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
    "save_safetensors",
    "write_tensor_files",
]

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, for a moment,
    for every thread, whose files would then be created with the wrong mode)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def save_safetensors(
    tensors: Mapping[str, np.ndarray],
    path: str | pathlib.Path,
    *,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """``safetensors.numpy.save_file``, the file's mode then following the umask like any
    other file's (``safetensors`` creates its files ``0600``: private on a shared disk), and
    its I/O failures raised as the ``OSError`` they are.

    safetensors reports a full disk or a read-only directory as its own ``SafetensorError``
    ("I/O error: No space left on device (os error 28)"), which code handling storage errors
    would not recognise.
    """
    try:
        save_file(dict(tensors), str(path), metadata=dict(metadata) if metadata else None)
    except SafetensorError as e:
        code = re.search(r"\(os error (\d+)\)", str(e))
        if code is None:
            raise
        number = int(code.group(1))
        raise OSError(number, os.strerror(number), str(path)) from e
    os.chmod(path, 0o666 & ~_umask())


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


# The dtypes a float parameter may be read from (cast to the parameter dtype if they differ).
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
# safetensors' header names → numpy's.
_DTYPE_NAMES = {
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "BOOL": "bool",
    **{f"I{n}": f"int{n}" for n in (8, 16, 32, 64)},
    **{f"U{n}": f"uint{n}" for n in (8, 16, 32, 64)},
}


def _open(file: pathlib.Path) -> Any:  # safetensors' handle type is private
    """``safe_open(file)``, a file that is not safetensors (truncated, empty, a header that
    lies about its size or offsets) as one sentence naming it."""
    try:
        return safe_open(file, framework="np")
    except (SafetensorError, OSError) as e:
        raise ValueError(
            f"{file} is not a readable safetensors file ({_first_line(e)}); replace it with a "
            "complete copy."
        ) from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0].rstrip(".") if text else type(error).__name__


def _shard_path(directory: pathlib.Path, name: str, shard: Any) -> pathlib.Path:
    """``directory / shard``, refusing a shard named outside ``directory`` (absolute, ``..``):
    an index must not make the loader open arbitrary files. Judged on the name, so symbolic
    links inside the directory (as in the Hugging Face cache) are still followed."""
    if not isinstance(shard, str) or not shard:
        raise ValueError(
            f"{INDEX_FILE} in {directory} maps {name!r} to {shard!r}, not a shard file name."
        )
    parts = pathlib.PurePosixPath(shard.replace("\\", "/")).parts
    if pathlib.PurePath(shard).is_absolute() or shard.startswith(("/", "\\")) or ".." in parts:
        raise ValueError(
            f"{INDEX_FILE} in {directory} names shard {shard!r} outside the model directory; "
            "shards must be files inside it."
        )
    return directory / shard


class TensorFiles(Mapping[str, np.ndarray]):
    """The tensors of a checkpoint directory, read lazily by name.

    ``shape(name)`` and ``dtype(name)`` read only the header, so tensors can be checked before
    any data is read. Shards named by an index must lie inside the directory.
    """

    def __init__(self, directory: str | pathlib.Path) -> None:
        directory = pathlib.Path(directory)
        index = directory / INDEX_FILE
        single = directory / SINGLE_FILE
        if index.is_file():
            try:
                weight_map = json.loads(index.read_text())["weight_map"]
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{index} is not a safetensors index (no 'weight_map').") from e
            if not isinstance(weight_map, dict):
                raise ValueError(
                    f"{index} is not a safetensors index ('weight_map' is a "
                    f"{type(weight_map).__name__}, not an object of tensor names to shards)."
                )
            self._files = {
                name: _shard_path(directory, name, shard) for name, shard in weight_map.items()
            }
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

    def _read(self, name: str, what: Any) -> Any:
        # Shards named by an index are opened here first; a header that lies about a tensor
        # (offsets past the end, a size that does not match its shape) fails on reading it.
        if name not in self._files:
            raise KeyError(name)
        handle = self._handle(name)
        try:
            return what(handle)
        except SafetensorError as e:
            raise ValueError(
                f"Tensor {name!r} in {self._files[name]} cannot be read ({_first_line(e)}); "
                "replace the file with a complete copy."
            ) from None

    def __getitem__(self, name: str) -> np.ndarray:
        return self._read(name, lambda h: h.get_tensor(name))

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of tensor ``name`` from the file header."""
        return tuple(self._read(name, lambda h: h.get_slice(name).get_shape()))

    def dtype(self, name: str) -> str:
        """The dtype name of tensor ``name`` from the file header (numpy's, e.g. ``"bfloat16"``,
        ``"int32"``; safetensors' own for types numpy lacks, e.g. ``"F8_E4M3"``)."""
        stored = str(self._read(name, lambda h: h.get_slice(name).get_dtype()))
        return _DTYPE_NAMES.get(stored, stored)

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
        save_safetensors(shards[0], path, metadata=metadata)
        return [path]
    written = []
    weight_map = {}
    for i, shard in enumerate(shards):
        path = directory / f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_safetensors(shard, path, metadata=metadata)
        written.append(path)
        weight_map.update(dict.fromkeys(shard, path.name))
    total = sum(t.nbytes for t in arrays.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX_FILE).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return [*written, directory / INDEX_FILE]
