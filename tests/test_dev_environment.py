"""The development environment stays the tree's: a zoo wheel installed over an editable
package (a pin installed into ``.venv`` by hand) is replaced by ``make install``
(``scripts/editable.py``), and the pinned environment of its own installs what it is asked."""

from __future__ import annotations

import subprocess
import sys
import venv

import pinned_env
import pytest
from envs import PACKAGES, ROOT, installed_zoo, leg_packages, run, third_party_site

DIRS = [PACKAGES["zoo-attention"], PACKAGES["zoo-flash-tpu"]]
EDITABLE = ROOT / "scripts" / "editable.py"


def _pip(python, *args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    proc = subprocess.run([*cmd, "--python", str(python), "install", *args], capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]


def _editable(python) -> dict[str, bool]:
    code = (
        "import sys; sys.path.insert(0, 'scripts'); from editable import installed_from; "
        "print({n: installed_from(n)[1] is not None for n in ('zoo-attention', 'zoo-flash-tpu')})"
    )
    return eval(run(python, "-c", code, cwd=ROOT).stdout)


def test_make_install_restores_the_editable_package_a_pin_replaced(build_root, wheels, env_dir):
    # The third-party packages of the main environment, build tools (hatchling and its pluggy)
    # included: editable installs are built here.
    site = third_party_site(build_root / "third-party-dev", test_tools=True)
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    (ROOT / "x").exists()
    (__import__("pathlib").Path(purelib.stdout.strip()) / "zoo_site.pth").write_text(f"{site}\n")
    _pip(python, "--no-deps", "--no-build-isolation", *(f"-e{ROOT / d}" for d in DIRS))
    assert _editable(python) == {"zoo-attention": True, "zoo-flash-tpu": True}
    assert run(python, str(EDITABLE), *DIRS, cwd=ROOT).stderr == ""  # nothing to do
    # A pin installed into the environment by hand: the kernel becomes a wheel.
    _pip(python, "--no-deps", str(wheels["zoo-flash-tpu"]))
    assert _editable(python) == {"zoo-attention": True, "zoo-flash-tpu": False}
    proc = run(python, str(EDITABLE), *DIRS, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "zoo-flash-tpu" in proc.stderr and "from a wheel, not the tree" in proc.stderr
    assert "zoo-attention" not in proc.stderr
    assert _editable(python) == {"zoo-attention": True, "zoo-flash-tpu": True}
    assert set(installed_zoo(python)) == {"zoo-attention", "zoo-flash-tpu"}


def test_pinned_environment_takes_the_pins_and_the_tree_for_the_rest():
    wanted = pinned_env.requirements(["zoo-flash-tpu==0.1.1"])
    assert wanted[-1] == "zoo-flash-tpu==0.1.1"
    names = [w.split("==")[0] for w in wanted[:-1]]
    # The tree packages this Python can install: zoo-tokamax only from Python 3.12.
    assert sorted(names) == sorted(n for n in leg_packages() if n != "zoo-flash-tpu")
    for requirement in wanted[:-1]:
        name, version = requirement.split("==")
        text = (ROOT / leg_packages()[name] / "pyproject.toml").read_text()
        assert f'version = "{version}"' in text
    with pytest.raises(ValueError, match="not a zoo package"):
        pinned_env.requirements(["numpy==2.0"])
    # A version that was never released is named with the releases there are, before anything
    # is built or installed.
    with pytest.raises(ValueError, match=r"zoo-flash-tpu 9\.9\.9 is not a release .*0\.1\.1"):
        pinned_env.requirements(["zoo-flash-tpu==9.9.9"])


def test_make_pinned_without_a_pin_names_one_instead_of_choosing(tmp_path, capsys):
    assert pinned_env.main([str(tmp_path / "pinned")]) == 2
    err = capsys.readouterr().err
    assert "name the release to pin" in err and "PIN='zoo-flash-tpu==" in err
    assert not (tmp_path / "pinned").exists()


def _planned(target: str, tmp_path: Path) -> str:
    """What ``make TARGET`` would run for environments not made yet (``make -n``)."""
    paths = [f"VENV={tmp_path / 'venv'}", f"TPU_VENV={tmp_path / 'venv-tpu'}"]
    proc = subprocess.run(["make", "-n", target, *paths], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_make_train_installs_only_what_training_runs(tmp_path):
    train = _planned("train", tmp_path)
    assert "zoo train" in train and "-e training/zoo-train" in train
    assert "requirements-dev.txt" not in train  # no torch, transformers, pytest, ruff
    assert str(tmp_path / "venv-tpu") not in train  # no libtpu environment
    test = _planned("test", tmp_path)
    assert "requirements-dev.txt" in test and str(tmp_path / "venv-tpu") in test


def test_make_eval_deps_adds_the_eval_extra_to_the_train_environment(tmp_path):
    # `zoo eval --tasks` after `make train`: one target installs zoo-train's eval extra into
    # the same .venv with the constraints, and the README says so where `--tasks` first appears.
    plan = _planned("eval-deps", tmp_path).replace("\\\n", " ")
    steps = [line for line in plan.splitlines() if "training/zoo-train[eval]" in line]
    assert len(steps) == 1 and str(tmp_path / "venv") in steps[0]
    assert "-c constraints.txt" in steps[0] and "requirements-dev.txt" not in plan
    readme = (ROOT / "README.md").read_text().splitlines()
    first = next(line for line in readme if "zoo eval" in line and "--tasks" in line)
    assert "make eval-deps" in first


def test_every_environment_installs_its_build_tools_before_its_packages(tmp_path):
    # Installs run without build isolation, so a dependency that ships only a source
    # distribution (rouge-score) is built by the environment's own setuptools: a new venv has
    # an old one without `bdist_wheel` (3.11) or none (3.12 on). Each environment gets the
    # pinned build tools before anything else, and no step depends on a cached wheel.
    envs = {
        name: tmp_path / name for name in ("venv", "venv-tpu", "venv-newest", "venv-newest-tpu")
    }
    paths = [
        f"VENV={envs['venv']}",
        f"TPU_VENV={envs['venv-tpu']}",
        f"NEWEST_VENV={envs['venv-newest']}",
        f"NEWEST_TPU_VENV={envs['venv-newest-tpu']}",
        f"NEWEST_PYTHON={sys.executable}",
    ]
    targets = [
        str(envs["venv"] / ".installed"),
        str(envs["venv-tpu"] / ".installed"),
        str(envs["venv-newest"] / ".full"),
        str(envs["venv-newest-tpu"] / ".installed"),
    ]
    proc = subprocess.run(
        ["make", "-n", *targets, *paths], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    assert any(line.startswith("setuptools==") for line in pins)
    for name, env in envs.items():
        steps = [
            line
            for line in proc.stdout.replace("\\\n", " ").splitlines()
            if line.startswith(f"{env}/bin/python -m pip")
        ]
        assert steps, f"{name}: no install step planned"
        first = steps[0].split()
        assert {"setuptools", "hatchling", "editables"} <= set(first), f"{name}: {steps[0]}"
        assert "-c" in first and "--no-build-isolation" not in first, f"{name}: {steps[0]}"
        assert all("setuptools" not in s.split() for s in steps[1:]), name


def test_ci_installs_as_a_new_machine_does():
    # CI's pip cache is its own and empty, and every environment's install steps are checked
    # on each supported Python before the tests run.
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'PIP_CACHE_DIR="$(mktemp -d)"' in ci and "export PIP_CACHE_DIR" in ci
    lines = [line.strip() for line in ci.splitlines() if line.startswith("make")]
    assert lines == ["make install-check", "make test", "make test-newest"]
