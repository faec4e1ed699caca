"""``zoo data prepare``, ``zoo data info`` and ``zoo data verify``: making, inspecting and
checking token stores."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .._usage import UsageError

HELP = "tokenize data once into a token store, describe a store, or check its content"
DESCRIPTION = (
    "Token stores: data tokenized once, read by row index by any number of processes. "
    "`zoo data prepare SOURCE... --out STORE` makes one; `zoo data info STORE` describes one; "
    "`zoo data verify STORE` checks every block against its hash."
)
_SHOWN = 4  # damaged ranges named in the error; every one is listed above it


def add_data_arguments(data: argparse.ArgumentParser) -> None:
    """``zoo data prepare``, ``zoo data info`` and ``zoo data verify``."""
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


def run_data(args: argparse.Namespace) -> int:
    """Run ``zoo data ACTION``."""
    from ..data import prepare_store, store_info
    from ..data.store import check_store, describe_info

    try:
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
    except ValueError as err:
        raise UsageError(str(err)) from None
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
    # Files and lines skipped were said while reading (by zoo_train.data.DocumentStream).
    print(f"{result['path']} {result['status']}: {what}.")


def _verify(store: str, workers: int | None, progress: bool) -> int:
    """``zoo data verify``: 0 on an intact store; each damaged range listed, then a
    :class:`UsageError` (exit 2) naming them."""
    from ..data.store import verify_store

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
    raise UsageError(
        f"The token store {store!r} is damaged: {named} do not match what was recorded when it "
        "was prepared; prepare it again (`zoo data prepare ... --overwrite`) or restore it "
        "from a good copy."
    )
