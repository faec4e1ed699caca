"""The compatibility matrix: zoo built from wheels into fresh environments.

(a) current everything; (b) zoo-flash-tpu 0.1.1, the README's pin, taken from a wheelhouse built
from the repository's history, with current layers, models and training; (c) no kernel package
at all; (d) a kernel built for attention contract 2.0. Each trains a tiny model for a few steps
and compares the logits it gives with the ``xla`` reference kernel's. The environments hold no
pytest, as a user's would not: ``zoo kernels verify`` runs there from the wheels alone.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
from pathlib import Path

import pytest
import wheelhouse
from envs import PACKAGES, ROOT, installed_zoo, make_env, run
from packaging.version import Version

import zoo_attention

DRIVER = Path(__file__).parent / "compat" / "drive.py"
VERIFY = Path(__file__).parent / "compat" / "verify_few.py"


def _pinned_flash() -> str:
    """The release the top-level README pins in "Pin, upgrade, roll back a kernel"; on a JAX
    that release's range excludes (it declared jax<0.11), the first release the compatibility
    matrix verified on this JAX, which is what the README tells such a user to pin."""
    running = importlib.metadata.version("jax")
    if Version(running) < Version("0.11"):
        return "0.1.1"
    rows = json.loads((ROOT / "docs" / "compatibility.json").read_text())["releases"]
    verified = [
        r["version"]
        for r in rows
        if r["distribution"] == "zoo-flash-tpu"
        and r["cells"].get(running, {}).get("status") == "verified"
    ]
    return min(verified, key=Version)


PINNED_FLASH = _pinned_flash()
# flash_tpu serves on CPU in Pallas TPU interpret mode; the training run asks for it first.
FLASH = {"ZOO_FLASH_TPU_INTERPRET": "1", "ZOO_ATTENTION": "flash_tpu,xla"}
NON_KERNEL = ["zoo-attention", "zoo-layers", "zoo-data", "zoo-models", "zoo-train"]


def _drive(python: Path, tmp: Path, env: dict[str, str]) -> dict:
    proc = run(python, str(DRIVER), str(tmp / "run"), env=env, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _trained(report: dict) -> None:
    losses = report["losses"]
    assert len(losses) >= 2, report
    assert all(loss == loss for loss in losses), "NaN loss"
    assert report["logits_finite"]


def _release_wheel(package: str, version: str, into: Path) -> Path:
    """``package`` at ``version``, built from its release commit as ``make wheelhouse`` does."""
    (release,) = [r for r in wheelhouse.releases((PACKAGES[package],)) if r.version == version]
    return wheelhouse.build(release, into)


def _current_version(name: str) -> str:
    pyproject = (ROOT / PACKAGES[name] / "pyproject.toml").read_text()
    return next(line.split('"')[1] for line in pyproject.splitlines() if line.startswith("version"))


def test_a_current_everything_and_verify_without_pytest(site, wheels, env_dir, tmp_path):
    python = make_env(env_dir, site, list(wheels.values()))
    assert set(installed_zoo(python)) == set(PACKAGES)
    report = _drive(python, tmp_path, FLASH)
    _trained(report)
    assert report["served"][0]["kernel"] == "flash_tpu"
    assert report["served"][0]["version"] == _current_version("zoo-flash-tpu")
    assert {"xla", "flash_tpu", "chunked"} <= set(report["kernels"])
    # Grouped-matmul kernels through their entry points: the contract's reference, zoo-layers'
    # tiled and zoo-megablox's megablox, each at its wheel's version.
    assert report["grouped_kernels"] == {
        "ragged_dot": _current_version("zoo-attention"),
        "tiled": _current_version("zoo-layers"),
        "megablox": _current_version("zoo-megablox"),
    }
    assert report["max_logit_diff_vs_xla"] < 1e-3
    # Every version as its pyproject.toml writes it (development markers included), in the
    # records the run wrote and in `zoo --version`.
    current = {name: _current_version(name) for name in PACKAGES}
    assert report["recorded"]["metrics"] == report["recorded"]["checkpoint"] == report["served"]
    assert report["recorded"]["checkpoint_packages"] == current
    shown = run(python.parent / "zoo", "--version").stdout.splitlines()
    assert shown == [f"{name} {current[name]}" for name in sorted(PACKAGES)]

    # `zoo kernels verify` from the wheels alone: no pytest here, as for a user.
    assert run(python, "-c", "import pytest").returncode != 0, "pytest leaked into the env"
    proc = run(python, str(VERIFY), "flash_tpu", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "2 passed, 0 failed" in proc.stdout  # one case and the named-scope check
    assert "verifying flash_tpu " in proc.stderr


def test_b_pinned_flash_release_from_wheelhouse_with_current_rest(
    site, wheels, build_root, env_dir, tmp_path
):
    assert _current_version("zoo-flash-tpu") != PINNED_FLASH
    house = build_root / "wheelhouse"
    _release_wheel("zoo-flash-tpu", PINNED_FLASH, house)
    # As the README's pin: `pip install --find-links wheelhouse zoo-flash-tpu==0.1.1`.
    python = make_env(
        env_dir,
        site,
        [wheels[n] for n in NON_KERNEL],
        pins=[f"zoo-flash-tpu=={PINNED_FLASH}"],
        find_links=[house],
    )
    installed = installed_zoo(python)
    assert installed["zoo-flash-tpu"] == PINNED_FLASH
    report = _drive(python, tmp_path, FLASH)
    _trained(report)
    assert report["served"][0] == {
        **report["served"][0],
        "kernel": "flash_tpu",
        "version": PINNED_FLASH,
    }
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


def test_e_pinned_chunked_before_contract_1_3_falls_back_loudly_for_sinks(
    site, wheels, build_root, env_dir, tmp_path
):
    """Rolling back zoo-chunked to its release before contract 1.3 (`make pinned
    PIN=zoo-chunked==0.2.1`): gpt-oss's attention asks for sinks, which that release's call
    does not take, so training runs on `xla`, with one warning naming the feature."""
    house = build_root / "wheelhouse"
    _release_wheel("zoo-chunked", "0.2.1", house)
    python = make_env(
        env_dir,
        site,
        [wheels[n] for n in NON_KERNEL],
        pins=["zoo-chunked==0.2.1"],
        find_links=[house],
    )
    assert installed_zoo(python)["zoo-chunked"] == "0.2.1"
    env = {"ZOO_ATTENTION": "chunked,xla", "ZOO_COMPAT_MODEL": "gpt-oss-tiny"}
    report = _drive(python, tmp_path, env)
    _trained(report)
    served = {(r["kernel"], r["fallback_reason"]) for r in report["served"]}
    assert {kernel for kernel, _ in served} == {"xla"}
    assert all("attention sinks" in reason for _, reason in served), served
    assert sum("instead of chunked" in w for w in report["warnings"]) == 1
    assert report["max_logit_diff_vs_xla"] == 0.0


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_wheel_carries_its_own_version_and_ranges(wheels, name):
    import zipfile

    wheel = wheels[name]
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    assert f"Version: {_current_version(name)}" in text
    for line in text.splitlines():
        if line.startswith("Requires-Dist: zoo-"):
            # Inter-package requirements are ranges with an upper bound, never pins or open ends.
            assert "<" in line, line
            assert "==" not in line, line


def test_wheelhouse_lists_every_release_of_every_package():
    # Independently of the scripts: every version line a commit added to a pyproject.toml,
    # development versions aside.
    expected = set()
    for name, directory in PACKAGES.items():
        log = subprocess.run(
            ["git", "log", "-p", "--format=", "--", f"{directory}/pyproject.toml"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        versions = re.findall(r'^\+version = "([^"]+)"', log, re.M)
        expected |= {(name, v) for v in versions if not Version(v).is_devrelease}
    releases = wheelhouse.releases()
    assert {(r.distribution, r.version) for r in releases} == expected
    assert ("zoo-flash-tpu", PINNED_FLASH) in expected
    wheel_names = [r.wheel_name for r in releases]
    assert len(wheel_names) == len(set(wheel_names)), "one wheel per package version"
