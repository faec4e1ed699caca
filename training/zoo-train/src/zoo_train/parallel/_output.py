"""Every line a process of a multi-process run prints starts with its label, ``[1/4] ``.

Done at the file-descriptor level, so that it covers everything on stdout and stderr: Python's
prints, logging, the progress bar (a label after each carriage return too), and what native
code writes, such as the collectives library's connection messages.

The collectives library's connection notes (``[Gloo] Rank 1 is connected to 1 peer ranks…``,
one per process, telling a user nothing) are dropped. One native message is turned into a
sentence: when JAX's distributed client loses the
coordination service (process 0 died) or hears that a process stopped its heartbeats, it ends
the process with a fatal log and a stack trace. The labeller recognises that log, writes which
process is gone in one sentence instead, and ends the process with the watchdog's exit status.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable

_SEPARATORS = re.compile(rb"([\r\n])")
_FATAL = b"Terminating process because the JAX distributed service detected fatal errors"
_UNHEALTHY = re.compile(rb"stopped sending heartbeats\):\s*([\d,\s]+)")
_NO_COORDINATOR = b"Failed to send RPC to coordination service"
# Lines the labeller drops: Gloo's note on each process's connections, written by native code.
_DROPPED = (b"[Gloo] ",)


def lost_process_sentence(fatal_log: bytes) -> str:
    """The sentence for JAX's fatal coordination log: which process is gone, and what to do."""
    restart = "Restart every process with the same command to resume from the last checkpoint."
    found = _UNHEALTHY.search(fatal_log)
    if found:
        ids = ", ".join(i.decode() for i in re.findall(rb"\d+", found.group(1)))
        return f"process {ids} stopped sending heartbeats to the coordinator; stopping. {restart}"
    if _NO_COORDINATOR in fatal_log:
        return f"the coordinator (process 0) is gone; stopping. {restart}"
    return f"the JAX distributed service reported a fatal error; stopping. {restart}"


class _Labeller:
    """Routes file descriptor ``fd`` through a pipe that puts ``label`` at each line's start."""

    def __init__(self, fd: int, label: bytes, on_fatal: Callable[[str], None] | None) -> None:
        self.fd = fd
        self.label = label
        self.original = os.dup(fd)
        self._on_fatal = on_fatal
        read, write = os.pipe()
        os.dup2(write, fd)
        os.close(write)
        self._read = read
        self._dropping = False  # inside a dropped line
        self._thread = threading.Thread(target=self._pump, name=f"zoo-label-{fd}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        at_start = True
        fatal: bytes | None = None
        while chunk := os.read(self._read, 65536):
            if self._on_fatal is not None:
                if fatal is None and _FATAL in chunk:
                    before, _, after = chunk.partition(_FATAL)
                    # Drop the fatal log line's own header ("F1203 12:02:57 client.h:80] ").
                    cut = max(before.rfind(b"\n"), before.rfind(b"\r"))
                    chunk, fatal = before[: cut + 1], after
                elif fatal is not None:
                    fatal += chunk
                    chunk = b""
                # At once: the fatal handler aborts the process soon after writing its message.
                if fatal is not None:
                    self._write_lines(chunk, at_start)
                    self._on_fatal(lost_process_sentence(fatal))
                    return
            at_start = self._write_lines(chunk, at_start)
        os.close(self._read)

    def _write_lines(self, chunk: bytes, at_start: bool) -> bool:
        out = []
        for piece in _SEPARATORS.split(chunk):
            if not piece:
                continue
            if self._dropping:
                self._dropping = piece != b"\n"
                continue
            if piece in (b"\n", b"\r"):
                at_start = True
            elif at_start:
                if piece.startswith(_DROPPED):
                    self._dropping = True
                    continue
                out.append(self.label)
                at_start = False
            out.append(piece)
        if out:
            os.write(self.original, b"".join(out))
        return at_start

    def say(self, line: str) -> None:
        """Write one labelled line straight to the original descriptor."""
        os.write(self.original, self.label + line.encode() + b"\n")

    def restore(self) -> None:
        """Put the original descriptor back; what is in the pipe is still written out."""
        os.dup2(self.original, self.fd)  # closes the pipe's only writer: the pump drains it
        self._thread.join(timeout=2.0)
        os.close(self.original)


_labellers: list[_Labeller] = []


def label_output(label: str, *, fatal_exit: int | None = None) -> None:
    """Start every line of stdout and stderr with ``label`` (until :func:`restore_output`).

    With ``fatal_exit``, JAX's fatal coordination log on stderr becomes one sentence and the
    process ends with that status.
    """
    if _labellers or not label:
        return
    sys.stdout.flush()
    sys.stderr.flush()

    def on_fatal(sentence: str) -> None:
        _labellers[-1].say(f"zoo: error: {sentence}")
        os._exit(fatal_exit or 1)

    _labellers.append(_Labeller(1, label.encode(), None))
    _labellers.append(_Labeller(2, label.encode(), on_fatal if fatal_exit else None))


def restore_output() -> None:
    """Flush and stop labelling (before the process exits, so nothing printed is lost)."""
    sys.stdout.flush()
    sys.stderr.flush()
    while _labellers:
        _labellers.pop().restore()
