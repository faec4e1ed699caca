"""The reward process itself (``python -m zoo_train.reward_process._worker``): it imports one
reward function and calls it on request, in a session of its own.

It imports nothing of zoo's but its messages, so it starts in a fraction of a second. After
every call it ends whatever processes the call left running (those of its process group, and
orphans, which reach it as the subreaper of what it starts) and says how many. When zoo's
process ends, however it ends, the lifeline pipe closes and this process ends its whole group.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import os
import pathlib
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ._messages import receive, send

#: What of an error's message a reply carries (a message may hold a whole data set).
SHOWN = 200
_PR_SET_CHILD_SUBREAPER = 36


def _guard_lifeline(lifeline: int) -> None:
    """End this process group when zoo's end of ``lifeline`` closes (zoo exited or was killed)."""

    def watch() -> None:
        with contextlib.suppress(OSError):
            os.read(lifeline, 1)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="zoo-reward-lifeline", daemon=True).start()


def _adopt_orphans() -> None:
    """Become the subreaper of what the reward starts (Linux): a grandchild whose parent exits
    is reparented here, where it can be found and ended, not to init."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _leftovers() -> list[int]:
    """Live processes of this process's group, or its children, other than itself (Linux)."""
    me, found = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            text = pathlib.Path("/proc", entry, "stat").read_text()
        except (OSError, UnicodeDecodeError):
            continue
        state, ppid, group = text[text.rindex(")") + 2 :].split()[:3]
        if state not in ("Z", "X") and (int(group) == me or int(ppid) == me):
            found.append(int(entry))
    return found


def end_leftovers() -> int:
    """End (SIGKILL) the processes a call left running and reap them; how many there were."""
    ended: set[int] = set()
    for _ in range(5):  # an ended parent's orphans reach this process a moment later
        found = _leftovers()
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        ended.update(found)
        time.sleep(0.01)
        _reap()
    _reap()
    return len(ended)


def _said(err: BaseException) -> str:
    text = " ".join(str(err).split())
    text = text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def load(spec: str) -> Callable[..., Any]:
    """The function ``spec`` (``path/to/file.py:function`` or ``module:function``) names.

    Raises:
        ValueError: the module cannot be imported (whatever its code raised) or has no such
            function.
    """
    where, name = spec.rsplit(":", 1)
    try:
        if where.endswith(".py"):
            path = pathlib.Path(where)
            module_name = f"zoo_reward_{path.stem}"
            found = importlib.util.spec_from_file_location(module_name, path)
            if found is None or found.loader is None:
                raise ImportError(f"{where} cannot be imported")
            module = importlib.util.module_from_spec(found)
            sys.modules[module_name] = module
            found.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except BaseException as e:  # the file's own code: SystemExit, a syntax error, anything
        raise ValueError(f"--reward {spec!r}: importing {where} raised {_said(e)}.") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"--reward {spec!r}: {where} has no function {name}.")
    return fn


def _call(fn: Callable[..., Any], arguments: dict[str, Any]) -> tuple[Any, ...]:
    try:
        values = fn(**arguments)
    except BaseException as e:  # SystemExit, KeyboardInterrupt, anything: a failed reward
        return ("raised", _said(e))
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    return ("returned", values)


def main(argv: list[str]) -> None:
    requests, replies, lifeline = (int(a) for a in argv[1:4])
    _guard_lifeline(lifeline)
    _adopt_orphans()
    _, spec, path = receive(requests)
    sys.path[:] = path  # the modules zoo's process would import
    try:
        fn = load(spec)
    except ValueError as e:
        send(replies, ("refused", str(e)))
        return
    send(replies, ("loaded", getattr(fn, "__name__", spec.rsplit(":", 1)[1])))
    while True:
        try:
            _, arguments = receive(requests)
        except EOFError:  # zoo is done with this function
            return
        reply = _call(fn, arguments)
        left = end_leftovers()
        try:
            send(replies, (*reply, left))
        except BrokenPipeError:
            return
        except Exception:  # the values cannot be pickled
            send(replies, ("unsendable", type(reply[1]).__name__, left))


if __name__ == "__main__":
    main(sys.argv)
