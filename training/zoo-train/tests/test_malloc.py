"""`zoo` caps glibc's malloc arenas, as glibc itself reports them (``malloc_info``)."""

import os
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent(
    """
    import ctypes, re, sys, tempfile, threading
    from zoo_train._malloc import cap_malloc_arenas

    capped = cap_malloc_arenas() if sys.argv[1] == "cap" else False
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = libc.fopen.restype = ctypes.c_void_p
    together = threading.Barrier(8)

    def allocate():  # eight threads allocating at once: glibc gives each an arena it may
        together.wait()
        kept = [libc.malloc(1000) for _ in range(100)]
        together.wait()

    threads = [threading.Thread(target=allocate) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    with tempfile.NamedTemporaryFile(suffix=".xml") as f:
        fp = libc.fopen(f.name.encode(), b"w")
        libc.malloc_info(0, ctypes.c_void_p(fp))
        libc.fclose(ctypes.c_void_p(fp))
        heaps = len(re.findall(r"<heap nr=", open(f.name).read()))
    print(capped, heaps)
    """
)


def probe(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], env={**clean, **env}, capture_output=True,
        text=True, check=True,
    ).stdout.split()  # fmt: skip
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_the_arena_cap_holds_eight_allocating_threads_to_two_arenas():
    assert probe("cap") == ("True", 2)
    capped, uncapped = probe("none")
    assert capped == "False" and uncapped > 2  # what the cap prevents


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_a_users_malloc_arena_max_is_left_alone():
    assert probe("cap", MALLOC_ARENA_MAX="4") == ("False", 4)
