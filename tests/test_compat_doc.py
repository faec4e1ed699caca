"""``docs/compatibility.md``, the kernel releases × JAX matrix, agrees with the releases.

The matrix itself is measured by ``make compat`` (minutes per cell); here the recorded results
are checked: the document is what they render to, every kernel release of ``releases.toml`` has
a cell on every JAX of the axis, and each release's declared JAX range is true (it admits
exactly the JAX versions it was verified on).
"""

from __future__ import annotations

import json

import compat_matrix  # scripts/, on the path by conftest.py
import package_version
import pytest
import wheelhouse
from envs import NEWEST_PACKAGES, PACKAGES
from packaging.specifiers import SpecifierSet
from packaging.version import Version

DATA = json.loads(compat_matrix.JSON_PATH.read_text())
RELEASES = wheelhouse.releases(compat_matrix.kernel_dirs())
ROWS = {(r["distribution"], r["version"]): r for r in DATA["releases"]}


def test_the_document_is_rendered_from_the_recorded_results():
    assert compat_matrix.DOC_PATH.read_text() == compat_matrix.render(DATA)


def test_the_axis_is_the_matrix_scripts_and_holds_both_test_legs():
    assert [j["jax"] for j in DATA["jax"]] == [j for j, _ in compat_matrix.JAX_AXIS]
    assert {"0.10.2", "0.12.0.1"} <= {j["jax"] for j in DATA["jax"]}


def test_every_kernel_release_has_a_cell_on_every_jax():
    assert set(ROWS) == {(r.distribution, r.version) for r in RELEASES}
    for row in DATA["releases"]:
        assert set(row["cells"]) == {j for j, _ in compat_matrix.JAX_AXIS}, row["version"]


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: f"{r.distribution}-{r.version}")
def test_each_release_declares_the_jax_it_was_verified_on(release):
    row = ROWS[(release.distribution, release.version)]
    assert row["declared"] == compat_matrix.declared_jax(release)
    declared = SpecifierSet(row["declared"])
    for jax_version, cell in row["cells"].items():
        expected = "verified" if declared.contains(jax_version) else "refused"
        assert cell["status"] == expected, (jax_version, cell)
        if cell["status"] == "refused":
            assert "jax" in cell["detail"], cell  # pip's reason names the JAX conflict


def test_each_kernels_newest_release_is_verified_on_every_jax():
    for distribution in compat_matrix.KERNELS:
        released = [r for r in RELEASES if r.distribution == distribution]
        if not released:  # before its first release: the document says so (test below)
            continue
        newest = released[-1]
        cells = ROWS[(distribution, newest.version)]["cells"].values()
        assert {c["status"] for c in cells} == {"verified"}, (distribution, newest.version)


def test_a_kernel_without_a_release_is_named_and_is_in_development():
    released = {r.distribution for r in RELEASES}
    waiting = [d for d in compat_matrix.KERNELS if d not in released]
    text = compat_matrix.DOC_PATH.read_text()
    assert ("Not on the matrix yet" in text) == bool(waiting)
    for distribution in waiting:
        assert distribution in text.split("Not on the matrix yet")[1].splitlines()[0]
        directory = {**PACKAGES, **NEWEST_PACKAGES}[distribution]
        version = package_version.version_of(compat_matrix.ROOT / directory)
        assert Version(version).is_devrelease, (distribution, version)
