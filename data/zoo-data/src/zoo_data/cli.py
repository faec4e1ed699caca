"""The ``zoo-data`` command (also ``python -m zoo_data`` and ``zoo data``): ``prepare``,
``info`` and ``verify`` make, describe and check token stores.

:func:`add_arguments` and :func:`run` are the subcommands' one implementation: ``zoo-data``
mounts them on its own parser (:func:`main`) and zoo-train's ``zoo`` on its ``data`` command.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

HELP = "tokenize data once into a token store, describe a store, or check its content"
DESCRIPTION = (
    "Token stores: data tokenized once, read by row index by any number of processes. "
    "`zoo-data prepare SOURCE... --out STORE` makes one; `zoo-data info STORE` describes one; "
    "`zoo-data verify STORE` checks every block against its hash."
)
_SHOWN = 4  # damaged ranges named in the error; every one is listed above it


def add_arguments(data: argparse.ArgumentParser) -> None:
    """Add the ``prepare``, ``info`` and ``verify`` subcommands to ``data`` (their choice is
    ``data_command`` in the parsed arguments)."""
    actions = data.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    prep = actions.add_parser(
        "prepare",
        help="tokenize sources into a token store",
        description="Tokenize text files, directories, globs, .jsonl/.ndjson (plain, .gz, "
        ".zst; text, `messages` chat or `prompt`/`completion` records), Parquet and Arrow "
        "files and `datasets.save_to_disk` directories into a token store, in parallel and in "
        "bounded memory. An interrupted prepare continues where it stopped when run again; on "
        "a store that is up to date it does nothing.",
    )
    prep.add_argument("sources", nargs="+", metavar="SOURCE", help="files, directories or globs")
    prep.add_argument("--out", required=True, metavar="STORE", help="the store directory")
    prep.add_argument(
        "--tokenizer",
        metavar="PATH",
        default=None,
        help="tokenizer.json or a Hugging Face directory (default: the byte tokenizer)",
    )
    prep.add_argument(
        "--text-field",
        default="text",
        metavar="NAME",
        help="the field or column holding a record's text (default: text)",
    )
    prep.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="tokenizing processes (default: every core)",
    )
    prep.add_argument(
        "--eval-fraction",
        type=float,
        default=0.05,
        metavar="F",
        help="share of documents held out, by a stable hash of each document's id (default: 0.05)",
    )
    prep.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a store made with other settings or inputs",
    )
    prep.add_argument("--no-progress", action="store_true", help="no progress bar")
    show = actions.add_parser(
        "info", help="describe a token store", description="Describe a token store."
    )
    show.add_argument("store", metavar="STORE")
    show.add_argument("--json", action="store_true", help="print the description as JSON")
    show.add_argument(
        "--verify", action="store_true", help="also check every shard's checksum (reads it all)"
    )
    check = actions.add_parser(
        "verify",
        help="check every block of a token store against its hash",
        description="Read every block of every shard file of a token store and check it against "
        "the hash recorded when it was prepared, on every core. Exits 0 when the store is "
        "intact, 2 naming each damaged shard file and byte range otherwise. A store made "
        "before stores carried block hashes has each file's sha256 checked instead.",
    )
    check.add_argument("store", metavar="STORE")
    check.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="threads reading and hashing (default: every core)",
    )
    check.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Run the subcommand ``args`` names (parsed by a parser :func:`add_arguments` built);
    returns the exit code.

    Raises:
        ValueError: a usage or input error, or a damaged store (its message is one sentence).
    """
    from . import prepare_store, store_info
    from .store import check_store, describe_info

    if args.data_command == "prepare":
        result = prepare_store(
            args.sources,
            args.out,
            tokenizer=args.tokenizer,
            text_field=args.text_field,
            workers=args.workers,
            eval_fraction=args.eval_fraction,
            overwrite=args.overwrite,
            # A bar's frames are carriage returns: only on a terminal, never into a log file.
            progress=not args.no_progress and sys.stderr.isatty(),
        )
        _say_prepared(result)
        return 0
    if args.data_command == "verify":
        return _verify(args.store, args.workers, not args.no_progress)
    if args.verify:
        check_store(args.store, checksums=True)
    summary = store_info(args.store)
    print(json.dumps(summary, indent=2) if args.json else describe_info(summary))
    return 0


def _say_prepared(result: dict[str, Any]) -> None:
    what = (
        f"{result['documents']:,} documents, {result['tokens']:,} tokens, {result['shards']} "
        f"shard(s), {result['splits']['eval']['documents']:,} document(s) held out"
    )
    if result["status"] == "up to date":
        print(f"{result['path']} is up to date ({what}); nothing to do.")
        return
    # Files and lines skipped were said while reading (by DocumentStream).
    print(f"{result['path']} {result['status']}: {what}.")


def _verify(store: str, workers: int | None, progress: bool) -> int:
    """``verify``: 0 on an intact store; each damaged range listed, then a ``ValueError``
    (exit 2) naming them."""
    from .store import verify_store

    report = verify_store(store, workers=workers, progress=progress)
    rate = report.bytes / max(report.seconds, 1e-9) / 1e9
    how = (
        f"{report.blocks:,} blocks"
        if report.hashed
        else "whole-file checksums (the store carries no block hashes)"
    )
    if not report.damaged:
        print(
            f"{store}: intact: {report.files} files, {report.bytes / 1e9:,.3f} GB, {how}, "
            f"checked in {report.seconds:.2f} s ({rate:.2f} GB/s)."
        )
        return 0
    for damage in report.damaged:
        print(f"damaged: {damage.describe()}")
    named = ", ".join(d.describe() for d in report.damaged[:_SHOWN])
    more = len(report.damaged) - _SHOWN
    named += f" and {more} more range(s) listed above" if more > 0 else ""
    raise ValueError(
        f"The token store {store!r} is damaged: {named} do not match what was recorded when it "
        "was prepared; prepare it again (`zoo data prepare ... --overwrite`) or restore it "
        "from a good copy."
    )


#: Errors a user causes (bad options, missing or damaged input): one sentence, exit 2.
_USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError)
#: Storage that cannot be written: one sentence, exit 2.
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line on stderr and exit code 2 (as ``zoo``'s)."""

    def error(self, message: str) -> NoReturn:
        message = message[0].upper() + message[1:] if message else "Bad arguments"
        self.exit(2, f"{self.prog}: error: {message.rstrip('.')}; see `{self.prog} --help`.\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``zoo-data`` parser: :func:`add_arguments` on a parser of its own."""
    from . import __version__

    parser = _Parser(prog="zoo-data", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"zoo-data {__version__}")
    add_arguments(parser)
    return parser


def _one_sentence(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if text.endswith((".", "?", "!")) else text + "."


class _Stderr(logging.Handler):
    """Log records as ``zoo-data: message`` on the current stderr, through ``tqdm.write`` so a
    line never lands inside a progress bar's frame."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm.auto import tqdm

        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # as StreamHandler.emit: a failed line is logging's to report
            self.handleError(record)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zoo-data`` console script and ``python -m zoo_data``; returns the
    exit code: 0 success, 2 a usage or input error or a damaged store (one sentence on stderr,
    no traceback unless ``ZOO_DEBUG=1``), 130 interrupted."""
    args = build_parser().parse_args(argv)
    # Skipped files and lines are logged: shown as `zoo-data: …` unless the calling program
    # has configured logging itself (then its handlers print them, once).
    handler = None if logging.root.handlers else _Stderr()
    if handler is not None:
        handler.setFormatter(logging.Formatter("zoo-data: %(message)s"))
        logging.root.addHandler(handler)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("zoo-data: interrupted.", file=sys.stderr)
        return 130
    except (OSError, ValueError) as err:
        storage = isinstance(err, OSError) and err.errno in _STORAGE_ERRNOS
        if os.environ.get("ZOO_DEBUG") or not (storage or isinstance(err, _USER_ERRORS)):
            raise
        print(f"zoo-data {args.data_command}: error: {_one_sentence(err)}", file=sys.stderr)
        return 2
    finally:
        if handler is not None:
            logging.root.removeHandler(handler)
