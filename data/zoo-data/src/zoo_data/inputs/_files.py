"""Which files a data source names: files, directories, globs and ``datasets`` directories.

Every file is found once by its resolved path, however many sources or symlinks lead to it
(a symlink loop under a ``**`` glob or inside a directory included).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import pathlib
import stat
from collections.abc import Iterator, Sequence

COMPRESSIONS = (".gz", ".zst")
JSONL = (".jsonl", ".ndjson")
# Named directly, these are refused with a sentence (inside a directory they are binary, skipped).
UNSUPPORTED = (".json", ".zip", ".tar", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".pdf")


@dataclasses.dataclass(frozen=True)
class InputFile:
    """One file to read.

    Attributes:
        path: where to read it.
        name: the stable name its documents' ids start with (the path inside the directory
            given, the file's name when named directly, the resolved path of a glob's match).
        kind: ``"text"``, ``"jsonl"``, ``"parquet"`` or ``"arrow"``.
        compression: ``".gz"``, ``".zst"`` or ``""``.
        explicit: named directly (a binary file is then an error, not a skip).
        source: the source (as given) it came from.
    """

    path: pathlib.Path
    name: str
    kind: str
    compression: str
    explicit: bool
    source: str


def file_kind(path: pathlib.Path) -> tuple[str, str]:
    """``(kind, compression)`` of a file, by its name."""
    name = path.name.lower()
    compression = next((c for c in COMPRESSIONS if name.endswith(c)), "")
    inner = name[: len(name) - len(compression)]
    if inner.endswith(JSONL):
        return "jsonl", compression
    if inner.endswith(".parquet") and not compression:
        return "parquet", ""
    if inner.endswith(".arrow") and not compression:
        return "arrow", ""
    return "text", compression


def _dataset_files(directory: pathlib.Path) -> list[pathlib.Path] | None:
    """The Arrow files of a ``datasets.save_to_disk`` directory (a ``Dataset``, or every split
    of a ``DatasetDict`` in its order), or ``None`` when ``directory`` is not one."""
    state = directory / "state.json"
    if state.is_file() and (directory / "dataset_info.json").is_file():
        files = json.loads(state.read_text()).get("_data_files", [])
        return [directory / f["filename"] for f in files]
    splits = directory / "dataset_dict.json"
    if splits.is_file():
        out: list[pathlib.Path] = []
        for split in json.loads(splits.read_text()).get("splits", []):
            out += _dataset_files(directory / split) or []
        return out
    return None


def _dataset_metadata(path: pathlib.Path) -> bool:
    """Whether ``path`` is a JSON file describing the ``datasets`` directory it is in."""
    return path.suffix == ".json" and _dataset_files(path.parent) is not None


def _walk(root: pathlib.Path, seen: set[str] | None = None) -> Iterator[pathlib.Path]:
    """Files under ``root`` in sorted order (hidden ones skipped), following symlinks but
    entering each real directory once (``seen``: those entered already, and those never to be
    entered); a ``datasets`` directory gives its Arrow files."""
    seen = set() if seen is None else seen

    def visit(directory: pathlib.Path) -> Iterator[pathlib.Path]:
        real = os.path.realpath(directory)
        if real in seen:
            return
        seen.add(real)
        arrow = _dataset_files(directory)
        if arrow is not None:
            yield from arrow
            return
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):  # gone since it was listed
            return
        except OSError as e:  # no permission: its files would be left out unsaid
            raise cannot_read(directory, e, "directory") from e
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = directory / entry.name
            try:
                is_dir, is_file = entry.is_dir(), entry.is_file()
            except OSError:  # a broken link, or one of too many levels
                continue
            if is_dir:
                yield from visit(path)
            elif is_file:
                yield path

    yield from visit(root)


def _inside(path: pathlib.Path, directories: set[str]) -> bool:
    """Whether ``path`` (resolved) is one of ``directories`` or lies inside one."""
    real = os.path.realpath(path)
    return any(real == d or real.startswith(d.rstrip(os.sep) + os.sep) for d in directories)


def _expand(source: str, excluded: set[str]) -> list[InputFile]:
    if not source.strip():
        raise ValueError("A data source is an empty path; pass a file, directory or glob.")
    if any(c in source for c in "*?["):
        matches = sorted(glob.glob(source, recursive=True))
        found: list[InputFile] = []
        # a `**` through a symlink loop matches one directory often; excluded ones never enter
        entered: set[str] = set(excluded)
        for match in map(pathlib.Path, matches):
            if _inside(match, excluded):
                continue
            if match.is_dir():
                found += [
                    _input(p, p.resolve().as_posix(), False, source) for p in _walk(match, entered)
                ]
            elif match.is_file() and not _dataset_metadata(match):
                found.append(_input(match, match.resolve().as_posix(), False, source))
        if not found:
            raise ValueError(
                f"The glob {source!r} matches no files; pass an existing path or pattern."
            )
        return found
    path = pathlib.Path(source)
    if path.is_dir():
        unfinished = unfinished_store(path)
        if unfinished is not None:
            raise ValueError(
                f"{source!r} holds a token store's shard files ({unfinished}) but no "
                "manifest.json, so it is not a token store (an unfinished or damaged one); "
                "prepare it again from its sources with --overwrite, or pass a store or raw data."
            )
        entered = set(excluded)
        files = [
            _input(p, p.relative_to(path).as_posix(), False, source) for p in _walk(path, entered)
        ]
        if not files:
            raise ValueError(f"The directory {source!r} holds no files; pass one with text files.")
        return files
    if path.is_file():
        if _dataset_metadata(path):
            raise ValueError(
                f"{source!r} is the metadata of a `datasets` directory; pass the directory "
                f"{str(path.parent)!r} itself."
            )
        if path.name.lower().endswith(UNSUPPORTED):
            raise ValueError(
                f"{source!r} is not a format zoo reads; pass text, .jsonl/.ndjson (plain, .gz "
                "or .zst), .parquet or .arrow files, or a `datasets.save_to_disk` directory."
            )
        return [_input(path, path.name, True, source)]
    kind = _special_kind(path)
    if kind is not None:  # reading one could block forever (a FIFO) or never end (a device)
        raise ValueError(
            f"The data source {source!r} is {kind}, not a file; pass a regular file, directory "
            "or glob (write a stream to a file first)."
        )
    raise ValueError(f"The data source {source!r} does not exist; pass a file, directory or glob.")


def _special_kind(path: pathlib.Path) -> str | None:
    """What ``path`` is when it exists but is neither a file nor a directory, else ``None``."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    kinds = {
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
    }
    return next((name for test, name in kinds.items() if test(mode)), None)


def cannot_read(path: pathlib.Path, error: BaseException, what: str = "file") -> ValueError:
    """The sentence for a data file (or ``what``) that was found but cannot be read: an I/O
    error, no permission, a damaged or truncated ``.gz``/``.zst``."""
    why = getattr(error, "strerror", None) or str(error) or type(error).__name__
    # The link as written (/proc/self/mem, not the pid it resolves to), else where it leads.
    real = os.readlink(path) if path.is_symlink() else os.path.realpath(path)
    link = f" (a link to {real})" if real != os.path.abspath(path) else ""
    return ValueError(
        f"Cannot read the data {what} {str(path)!r}{link}: {why[0].lower()}{why[1:]}; make it "
        "readable or leave it out of the data."
    )


def _input(path: pathlib.Path, name: str, explicit: bool, source: str) -> InputFile:
    kind, compression = file_kind(path)
    return InputFile(path, name, kind, compression, explicit, source)


def unfinished_store(directory: pathlib.Path) -> str | None:
    """The first shard file of a token store in ``directory`` when it has no manifest (a
    store whose prepare never finished, or whose manifest was lost), else ``None``."""
    if (directory / "manifest.json").exists():
        return None
    for split in ("train", "eval"):
        folder = directory / split
        if not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            for entry in entries:
                stem, _, suffix = entry.name.partition(".")
                if stem.isdigit() and suffix in ("tokens", "starts", "mask", "pairs"):
                    return f"{split}/{entry.name}"
    return None


def list_inputs(
    sources: Sequence[str | os.PathLike[str]],
    *,
    exclude: Sequence[str | os.PathLike[str]] = (),
) -> list[InputFile]:
    """Every file of ``sources`` in order (sources as given, files sorted by path), each once
    by its resolved path; nothing in the directories ``exclude`` names (the store being
    written, which a glob or a directory above it would otherwise read back in).

    Raises:
        ValueError: a source that does not exist or is not a file (a FIFO), an empty or
            unreadable directory, a glob that matches nothing, or a file named directly in a
            format zoo does not read.
    """
    seen: set[str] = set()
    out: list[InputFile] = []
    excluded = {os.path.realpath(e) for e in exclude}
    for source in sources:
        try:
            items = _expand(os.fspath(source), excluded)
        except PermissionError as e:  # a directory on the way that cannot be searched
            raise cannot_read(pathlib.Path(source), e, "source") from e
        for item in items:
            real = os.path.realpath(item.path)
            if real not in seen:
                seen.add(real)
                out.append(item)
    return out
