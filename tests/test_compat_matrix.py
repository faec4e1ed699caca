"""The compatibility matrix: zoo built from wheels into fresh environments.

(a) current everything; (b) the previous release of zoo-flash-tpu, built from the repository's
history, with current layers, models and training; (c) no kernel package at all; (d) a kernel
built for attention contract 2.0. Each trains a tiny model for a few steps and compares the
logits it gives with the ``xla`` reference kernel's.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from _envs import PACKAGES, ROOT, build_wheel, installed_zoo, make_env, run
from release_commit import previous_versions, release_commit

import zoo_attention

DRIVER = Path(__file__).parent / "compat" / "drive.py"
# flash_tpu serves on CPU in Pallas TPU interpret mode; the training run asks for it first.
FLASH = {"ZOO_FLASH_TPU_INTERPRET": "1", "ZOO_ATTENTION": "flash_tpu,xla"}
NON_KERNEL = ["zoo-attention", "zoo-layers", "zoo-models", "zoo-train"]


def _drive(python: Path, tmp: Path, env: dict[str, str]) -> dict:
    proc = run(python, str(DRIVER), str(tmp / "run"), env=env, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _trained(report: dict) -> None:
    losses = report["losses"]
    assert len(losses) >= 2, report
    assert all(loss == loss for loss in losses), "NaN loss"
    assert report["logits_finite"]


def _previous_flash_release(build_root: Path) -> tuple[str, Path]:
    """The newest earlier zoo-flash-tpu release, as a wheel built from its commit."""
    versions = previous_versions(PACKAGES["zoo-flash-tpu"])
    assert versions, "zoo-flash-tpu has no earlier release in this repository's history"
    version = versions[0]
    commit = release_commit(PACKAGES["zoo-flash-tpu"], version)
    src = build_root / f"flash-tpu-{version}"
    archive = build_root / f"flash-tpu-{version}.tar"
    with archive.open("wb") as f:
        subprocess.run(
            ["git", "archive", commit, PACKAGES["zoo-flash-tpu"]], cwd=ROOT, stdout=f, check=True
        )
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    return version, build_wheel(
        src / PACKAGES["zoo-flash-tpu"], build_root / f"dist-flash-{version}"
    )


def test_a_current_everything(site, wheels, env_dir, tmp_path):
    python = make_env(env_dir, site, list(wheels.values()))
    assert set(installed_zoo(python)) == set(PACKAGES)
    report = _drive(python, tmp_path, FLASH)
    _trained(report)
    assert report["served"][0]["kernel"] == "flash_tpu"
    assert {"xla", "flash_tpu", "chunked"} <= set(report["kernels"])
    assert report["max_logit_diff_vs_xla"] < 1e-3


def test_b_previous_flash_release_with_current_rest(site, wheels, build_root, env_dir, tmp_path):
    version, old_wheel = _previous_flash_release(build_root)
    python = make_env(env_dir, site, [wheels[n] for n in NON_KERNEL] + [old_wheel])
    installed = installed_zoo(python)
    assert installed["zoo-flash-tpu"] == version
    report = _drive(python, tmp_path, FLASH)
    _trained(report)
    assert report["served"][0] == {**report["served"][0], "kernel": "flash_tpu", "version": version}
    assert report["max_logit_diff_vs_xla"] < 1e-3


def test_c_no_kernel_package_falls_back_to_xla_with_warning(site, wheels, env_dir, tmp_path):
    python = make_env(env_dir, site, [wheels[n] for n in NON_KERNEL])
    assert set(installed_zoo(python)) == set(NON_KERNEL)
    report = _drive(python, tmp_path, {"ZOO_ATTENTION": "flash_tpu,xla"})
    _trained(report)
    assert set(report["kernels"]) == {"xla"}
    assert report["served"][0]["kernel"] == "xla"
    assert "flash_tpu: not installed" in report["served"][0]["fallback_reason"]
    assert sum("instead of flash_tpu" in w for w in report["warnings"]) == 1
    assert report["max_logit_diff_vs_xla"] == 0.0


def test_d_kernel_for_contract_2_is_refused(site, wheels, contract2_wheel, env_dir, tmp_path):
    python = make_env(env_dir, site, [wheels[n] for n in NON_KERNEL] + [contract2_wheel])
    report = _drive(python, tmp_path, {})
    _trained(report)
    assert "contract2" not in report["kernels"]
    reason = report["refused"]["contract2"]
    assert "contract 2.0" in reason
    assert f"contract {zoo_attention.CONTRACT_VERSION}" in reason
    assert any("refused kernel 'contract2'" in w for w in report["warnings"])
    assert report["served"][0]["kernel"] == "xla"


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_wheel_carries_its_own_version_and_ranges(wheels, name):
    import zipfile

    wheel = wheels[name]
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    pyproject = (ROOT / PACKAGES[name] / "pyproject.toml").read_text()
    version = next(
        line.split('"')[1] for line in pyproject.splitlines() if line.startswith("version")
    )
    assert f"Version: {version}" in text
    for line in text.splitlines():
        if line.startswith("Requires-Dist: zoo-"):
            # Inter-package requirements are ranges with an upper bound, never pins or open ends.
            assert "<" in line, line
            assert "==" not in line, line
