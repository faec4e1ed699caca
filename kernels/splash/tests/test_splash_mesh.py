"""On a mesh the contract runs ``splash`` under ``shard_map``, each device on its batch rows and
heads: the numbers agree with ``xla`` on the same mesh (in a process of its own with four CPU
devices, which must be set before JAX starts; see ``splash_mesh.py``)."""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import subprocess
import sys

DRIVER = pathlib.Path(__file__).resolve().parent / "splash_mesh.py"


def test_sharded_over_batch_and_heads_splash_agrees_with_xla() -> None:
    seed = secrets.randbits(32)
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "ZOO_SPLASH_INTERPRET": "1",
    }
    env.pop("ZOO_ATTENTION", None)
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(seed)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    # float32 against float32: the conformance suite's tolerances.
    assert errors["out"] <= 2e-5 and max(errors["dq"], errors["dk"], errors["dv"]) <= 1e-4, (
        seed,
        errors,
    )
