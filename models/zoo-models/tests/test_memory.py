"""The memory a process may use: physical memory, a cgroup's limit (v1 or v2, on the cgroup or
an ancestor) or ``ulimit -v``, whichever is smallest."""

from __future__ import annotations

import os
import pathlib
import resource

import numpy as np
import pytest

import zoo_models
from zoo_models._memory import cgroup_memory_limit


def _tree(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_smallest_cgroup_limit_on_the_path_is_found(tmp_path, version) -> None:
    rng = np.random.default_rng()
    own, parent = (int(x) * 4096 for x in rng.integers(1, 2**20, 2))
    if version == "v2":
        proc = "0::/jobs/mine\n"
        files = {"jobs/mine/memory.max": f"{own}\n", "jobs/memory.max": f"{parent}\n",
                 "memory.max": "max\n"}  # fmt: skip
    else:
        proc = "7:pids:/\n4:memory:/jobs/mine\n1:cpu,cpuacct:/\n"
        files = {"memory/jobs/mine/memory.limit_in_bytes": f"{own}\n",
                 "memory/jobs/memory.limit_in_bytes": f"{parent}\n",
                 "memory/memory.limit_in_bytes": "9223372036854771712\n"}  # fmt: skip
    _tree(tmp_path / "sys", files)
    (tmp_path / "cgroup").write_text(proc)
    assert cgroup_memory_limit(tmp_path / "cgroup", tmp_path / "sys") == min(own, parent)
    # Inside a container the own cgroup is mounted as the root: its limit is read there.
    _tree(tmp_path / "container", {"memory.max" if version == "v2" else
                                   "memory/memory.limit_in_bytes": f"{own}\n"})  # fmt: skip
    assert cgroup_memory_limit(tmp_path / "cgroup", tmp_path / "container") == own
    (tmp_path / "unlimited").mkdir()
    assert cgroup_memory_limit(tmp_path / "cgroup", tmp_path / "unlimited") is None


def test_ulimit_v_lowers_the_memory_a_process_may_use() -> None:
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert zoo_models.host_memory_bytes() <= physical
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    status = pathlib.Path("/proc/self/status").read_text()
    size = int(status.split("VmSize:")[1].split()[0]) * 1024
    limit = size + int(np.random.default_rng().integers(2**30, 2**31))
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        have, what = zoo_models.host_memory_limit()
        free, free_what = zoo_models.host_memory_free()
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert have == min(limit, physical) and "ulimit -v" in what
    # What is left: the limit less the address space already taken (within what the calls
    # themselves allocated).
    assert "ulimit -v" in free_what and abs(free - (limit - size)) < 64 * 2**20
