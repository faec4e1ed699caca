"""Another process holding a run lock, for the tests: ``with held_lock(directory) as pid``.

The holder loads ``zoo_train.checkpoint._lock`` alone (no jax), so it is up in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import zoo_train

_HOLDER = """
import sys, types
for name, path in (("zoo_train", sys.argv[1]), ("zoo_train.checkpoint", sys.argv[1] + "/checkpoint")):
    package = types.ModuleType(name)
    package.__path__ = [path]
    sys.modules[name] = package
from zoo_train.checkpoint import _lock
_lock.acquire(sys.argv[2])
print("held", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def held_lock(directory: pathlib.Path) -> Iterator[int]:
    """Yield the pid of a live process that holds ``directory``'s run lock until the block ends."""
    source = str(pathlib.Path(zoo_train.__file__).parent)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, source, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
