"""``zoo kernels`` tells the truth about the running JAX: the JAX, jaxlib and libtpu it runs on,
each kernel's verified range (its release's ``jax`` requirement), and one warning line for a
kernel installed outside that range. Runs record jax, jaxlib and libtpu."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.version import Version

from zoo_train._provenance import provenance

KERNEL_MODULE = """
import zoo_attention
from zoo_attention._xla import KERNEL as _XLA


class Kernel(zoo_attention.AttentionKernel):
    name = "{name}"

    def check(self, spec):
        return None

    def __call__(self, query, key, value, segment_ids, spec):
        return _XLA(query, key, value, segment_ids, spec)


KERNEL = Kernel()
"""


def _install_fake_kernel(site: Path, name: str, version: str, jax_range: str) -> None:
    """A kernel distribution as pip leaves one: its module and its ``.dist-info``."""
    (site / f"{name}_pkg.py").write_text(KERNEL_MODULE.format(name=name))
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    metadata = f"""\
        Metadata-Version: 2.1
        Name: {name.replace("_", "-")}
        Version: {version}
        Requires-Dist: jax{jax_range}
        Requires-Dist: zoo-attention<2,>=1
        """
    (info / "METADATA").write_text(textwrap.dedent(metadata))
    (info / "entry_points.txt").write_text(f"[zoo.attention_kernels]\n{name} = {name}_pkg:KERNEL\n")


def _zoo_kernels(site: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "zoo_train.cli", "kernels"], capture_output=True, text=True, env=env
    )


def _next_minor(version: str) -> str:
    v = Version(version)
    return f"{v.major}.{v.minor + 1}"


def test_kernels_listing_shows_the_running_jax_and_each_kernels_verified_range(tmp_path):
    jax_version = importlib.metadata.version("jax")
    # One release verified on a range that ends before this JAX, one on a range that holds it.
    _install_fake_kernel(tmp_path, "stale_kernel", "0.1.0", f"<{jax_version}")
    _install_fake_kernel(
        tmp_path, "fresh_kernel", "0.2.0", f">={jax_version},<{_next_minor(jax_version)}"
    )
    proc = _zoo_kernels(tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"running on jax {jax_version}, jaxlib ")
    assert f"Python {sys.version.split()[0]}" in lines[0]
    header = next(line for line in lines if line.startswith("name "))
    assert "verified on jax" in header
    rows = {line.split()[0]: line.split() for line in lines if line.split()[:1] != ["name"]}
    assert rows["stale_kernel"][3] == f"<{jax_version}"
    assert rows["fresh_kernel"][3] == f">={jax_version},<{_next_minor(jax_version)}"
    # The reference kernel's range is its own distribution's, which holds the running JAX.
    assert Version(jax_version) in _specifier(rows["xla"][3])
    warnings = [line for line in proc.stderr.splitlines() if "was verified on" in line]
    assert warnings == [
        f"zoo: stale_kernel 0.1.0 was verified on jax<{jax_version}, not on the running jax "
        f"{jax_version}: check it here with `zoo kernels verify stale_kernel`, or install a "
        "release verified on this JAX (docs/compatibility.md lists them)."
    ]


def _specifier(text: str):
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(text)


@pytest.mark.parametrize("name", ["jax", "jaxlib"])
def test_runs_record_the_jax_libraries(name):
    assert provenance()["libraries"][name] == importlib.metadata.version(name)
