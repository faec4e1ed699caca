"""Long-lived benchmark worker processes driven over JSON lines.

A worker is ``python -m <module> '<json config>'``; it answers each request line on its own
protocol channel (a duplicate of its original stdout; its ``sys.stdout`` is sent to stderr so
library chatter cannot corrupt the channel). Running each framework in its own process keeps
thread pools and allocators from interfering, and lets the parent interleave A B A B.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any, TextIO


def error_text(err: BaseException) -> str:
    """The first informative line of an error, short enough for a table cell."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = next((line for line in lines if "Error" in line or "error" in line), None)
    return f"{type(err).__name__}: {text or (lines[0] if lines else '')}"[:240]


def guarded(fn: Callable[..., dict], **kwargs: Any) -> dict:
    """``fn(**kwargs)``, or ``{"error": ...}``: a cell a kernel refuses or fails to compile
    becomes the cell's text instead of ending the worker."""
    try:
        return fn(**kwargs)
    except Exception as err:
        return {"error": error_text(err)}


def serve(handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]], hello: dict) -> None:
    """Worker side: send ``hello``, then answer ``{"op": name, ...}`` requests until ``quit``."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    channel.write(json.dumps(hello) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "quit":
            break
        channel.write(json.dumps(handlers[request["op"]](request)) + "\n")


class Worker:
    """Parent side: one worker process."""

    def __init__(
        self,
        module: str,
        config: dict[str, Any],
        env: dict[str, str] | None = None,
        python: str | None = None,
    ):
        """Start ``python -m module 'config'`` (``python``: this interpreter unless named)."""
        self.module = module
        self._proc = subprocess.Popen(
            [python or sys.executable, "-m", module, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # inherited: warnings show in the run's log
            text=True,
            env={**os.environ, **(env or {})},
        )
        self._hello: dict[str, Any] | None = None

    @property
    def hello(self) -> dict[str, Any]:
        """The worker's first message (waits for its set-up to finish)."""
        if self._hello is None:
            self._hello = self._read()
        return self._hello

    def _read(self) -> dict[str, Any]:
        stdout: TextIO = self._proc.stdout  # type: ignore[assignment]
        line = stdout.readline()
        if not line:
            code = self._proc.wait()
            raise RuntimeError(
                f"worker {self.module} exited with code {code} (see its stderr above)"
            )
        return json.loads(line)

    def ask(self, op: str, **kwargs: Any) -> dict[str, Any]:
        """Send one request and wait for its answer."""
        self.hello  # noqa: B018 - the set-up message comes first
        stdin: TextIO = self._proc.stdin  # type: ignore[assignment]
        stdin.write(json.dumps({"op": op, **kwargs}) + "\n")
        stdin.flush()
        return self._read()

    def close(self) -> None:
        """Ask the worker to quit and wait for it (a minute at most, then kill it)."""
        if self._proc.poll() is None:
            try:
                stdin: TextIO = self._proc.stdin  # type: ignore[assignment]
                stdin.write(json.dumps({"op": "quit"}) + "\n")
                stdin.close()
            except BrokenPipeError:
                pass
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
