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


def _install_fake_kernel(
    site: Path,
    name: str,
    version: str,
    jax_range: str,
    group: str = "zoo.attention_kernels",
    contract: str = "<2,>=1",
) -> None:
    """A kernel distribution as pip leaves one: its module and its ``.dist-info`` (the listing
    reads only the metadata, so the module need not be of the group's kind)."""
    (site / f"{name}_pkg.py").write_text(KERNEL_MODULE.format(name=name))
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    metadata = f"""\
        Metadata-Version: 2.1
        Name: {name.replace("_", "-")}
        Version: {version}
        Requires-Dist: jax{jax_range}
        Requires-Dist: zoo-attention{contract}
        """
    (info / "METADATA").write_text(textwrap.dedent(metadata))
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {name}_pkg:KERNEL\n")


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
    assert header.split()[:3] == ["name", "kind", "version"]
    assert rows["stale_kernel"][1:2] + rows["stale_kernel"][4:] == ["attention", f"<{jax_version}"]
    assert rows["fresh_kernel"][4] == f">={jax_version},<{_next_minor(jax_version)}"
    # The reference kernels' range is their own distribution's, which holds the running JAX.
    assert Version(jax_version) in _specifier(rows["xla"][4])
    assert rows["ragged_dot"][1] == "grouped_matmul"
    assert Version(jax_version) in _specifier(rows["ragged_dot"][4])
    warnings = [line for line in proc.stderr.splitlines() if "was verified on" in line]
    assert warnings == [
        f"zoo: stale_kernel 0.1.0 was verified on jax<{jax_version}, not on the running jax "
        f"{jax_version}: check it here with `zoo kernels verify stale_kernel`, or install a "
        "release verified on this JAX (docs/compatibility.md lists them)."
    ]


def test_kernels_listing_shows_grouped_matmul_kernels_with_their_kind_and_contract(tmp_path):
    jax_version = importlib.metadata.version("jax")
    group = "zoo.grouped_matmul_kernels"
    _install_fake_kernel(tmp_path, "gmm_kernel", "0.3.0", f"<{jax_version}", group, "<2,>=1.2")
    # A release built for a contract this zoo-attention does not provide.
    _install_fake_kernel(tmp_path, "future_gmm", "1.0.0", f">={jax_version}", group, "<3,>=2")
    proc = _zoo_kernels(tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.splitlines()[3:-1]  # after the header and rule, before the hint
    rows = {line.split()[0]: line.split() for line in table}
    major = importlib.metadata.version("zoo-attention").split(".")[0]
    assert rows["gmm_kernel"][1:4] == ["grouped_matmul", "0.3.0", f"{major}.x"]
    assert rows["future_gmm"][3] == "needs:zoo-attention>=2,<3"
    # Attention first, then grouped matmul; each kind's rows by name.
    kinds = [row[1] for row in rows.values()]
    assert kinds == sorted(kinds) and {"attention", "grouped_matmul"} <= set(kinds)
    warnings = [line for line in proc.stderr.splitlines() if "was verified on" in line]
    assert any(w.startswith("zoo: gmm_kernel 0.3.0 was verified on jax<") for w in warnings)


def _specifier(text: str):
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(text)


@pytest.mark.parametrize("name", ["jax", "jaxlib"])
def test_runs_record_the_jax_libraries(name):
    assert provenance()["libraries"][name] == importlib.metadata.version(name)
