"""The JAX a user already has is the JAX zoo runs on.

Every package declares the JAX (and Python) range its tests pass on, the running leg's JAX is
inside each, installing the tree into this environment keeps the installed JAX, and a
deprecation raised from JAX or Pallas fails a test. These run on both legs of ``make test``
(jax 0.10.2 on Python 3.11, jax 0.12 on Python >= 3.12).
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest
import run_tests  # scripts/, on the path by conftest.py
from envs import NEWEST_PACKAGES, PACKAGES, ROOT, leg_packages
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version

JAX_NAMES = {"jax", "jaxlib", "libtpu"}
#: Packages that run without JAX: they declare no JAX (their own tests check that they import none).
JAX_FREE = {"zoo-data"}


def _project(directory: str) -> dict:
    return tomllib.loads((ROOT / directory / "pyproject.toml").read_text())["project"]


def _requirements(project: dict) -> list[Requirement]:
    extras = project.get("optional-dependencies", {}).values()
    return [Requirement(r) for r in [*project["dependencies"], *(r for e in extras for r in e)]]


def _pins() -> dict[str, str]:
    """The constraints file's exact pins that apply to this interpreter."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(default_environment()):
                (spec,) = req.specifier
                pins[req.name.lower()] = spec.version
    return pins


@pytest.mark.parametrize("name", sorted({**PACKAGES, **NEWEST_PACKAGES}))
def test_each_package_declares_a_jax_and_python_range_holding_this_leg(name):
    project = _project({**PACKAGES, **NEWEST_PACKAGES}[name])
    python = Version(".".join(map(str, sys.version_info[:3])))
    declared = Requirement(f"python{project['requires-python']}").specifier
    if name in NEWEST_PACKAGES and name not in leg_packages():
        # A package of the newest leg alone says so: this leg's Python is outside its range.
        assert not declared.contains(python), f"{name}: python{declared}"
        return
    jax_version = Version(importlib.metadata.version("jax"))
    ranges = [r.specifier for r in _requirements(project) if r.name == "jax"]
    if name in JAX_FREE:
        assert not ranges and not {r.name for r in _requirements(project)} & JAX_NAMES, name
    else:
        assert ranges, f"{name} declares no jax range"
    for spec in ranges:
        assert spec.contains(jax_version), f"{name}: jax{spec} excludes the running {jax_version}"
        # The two legs' ends, whatever leg runs this: 0.10.2 (unless the package is the newest
        # leg's alone) and 0.12.
        oldest = name in NEWEST_PACKAGES or spec.contains("0.10.2")
        assert oldest and spec.contains("0.12.0.1"), f"{name}: jax{spec}"
    assert declared.contains(python)


def test_the_constraints_pin_this_legs_jax_jaxlib_and_libtpu():
    pins = _pins()
    assert pins["jax"] == pins["jaxlib"] == importlib.metadata.version("jax")
    assert importlib.metadata.version("jaxlib") == pins["jaxlib"]
    expected = "0.12.0.1" if sys.version_info >= (3, 12) else "0.10.2"
    assert pins["jax"] == expected
    assert "libtpu" in pins


@pytest.mark.parametrize("constraints", [True, False], ids=["constraints", "plain"])
def test_installing_the_tree_keeps_the_installed_jax(tmp_path, constraints):
    # What pip would do, resolved against this environment only (no index): every zoo package
    # again (editable), and nothing else; a range that excluded the installed JAX would need
    # another one from an index, and fail here.
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--dry-run"]
    cmd += ["--no-index", "--no-build-isolation", "--report", str(report)]
    cmd += ["-c", str(ROOT / "constraints.txt")] if constraints else []
    packages = leg_packages()
    cmd += [arg for d in packages.values() for arg in ("-e", str(ROOT / d))]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = {item["metadata"]["name"] for item in json.loads(report.read_text())["install"]}
    assert names == set(packages), names - set(packages)


def _pytest_config(start: Path) -> Path | None:
    """The file pytest takes its configuration from for a suite rooted at ``start``."""
    for directory in [start, *start.parents]:
        for name in ("pytest.ini", ".pytest.ini"):
            if (directory / name).is_file():
                return directory / name
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            tool = tomllib.loads(pyproject.read_text()).get("tool", {})
            if "pytest" in tool:
                return pyproject
        for name, section in (("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]")):
            path = directory / name
            if path.is_file() and section in path.read_text():
                return path
    return None


@pytest.mark.parametrize("suite", sorted({**run_tests.SUITES, **run_tests.NEWEST_ONLY}))
def test_every_suite_runs_with_the_repository_pytest_ini(suite):
    path, args, _ = {**run_tests.SUITES, **run_tests.NEWEST_ONLY}[suite]
    for start in [path, *(a for a in args if not a.startswith("-"))]:
        directory = ROOT / start
        directory = directory if directory.is_dir() else directory.parent
        assert _pytest_config(directory) == ROOT / "pytest.ini", start


@pytest.mark.parametrize("module", ["jax._src.pallas.core", "jax.experimental", "zoo_layers._x"])
@pytest.mark.parametrize("category", [DeprecationWarning, FutureWarning])
def test_a_deprecation_from_jax_or_reported_at_zoo_code_fails_a_test(module, category):
    # JAX warns from its own modules, or (with stacklevel) at the zoo line that called it.
    with pytest.raises(category):
        warnings.warn_explicit("going away", category, "caller.py", 1, module=module)


def test_other_libraries_deprecations_stay_warnings():
    with pytest.warns(DeprecationWarning, match="going away"):
        warnings.warn_explicit("going away", DeprecationWarning, "x.py", 1, module="jaxtyping")
