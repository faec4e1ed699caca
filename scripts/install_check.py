"""Run every environment's install steps as a new machine runs them, on each supported Python.

Usage: python scripts/install_check.py [--keep] [MINOR ...]   (MINOR: 3.11, 3.12, 3.13)

A warm pip cache hides a missing build step: a dependency that ships only a source
distribution installs from a wheel some earlier run built, until a machine without that wheel
tries. So, for every supported Python that runs here (found as ``newest_python`` finds them),
this makes new virtual environments under ``build/install-check/<minor>/`` with an empty pip
cache of their own and runs the Makefile's own recipes into them (``make`` with the environment
paths pointed there): the build tools are installed for real, every package install runs as
``pip install --dry-run --report``, which resolves the whole environment and prepares the
metadata of each source distribution; then every source distribution of the reports is built
into a wheel with the environment's own build tools, as the real install would build it. It
fails, naming the environment and pip's error, where a new machine's ``make`` would fail.
``.ci/run`` runs it first (``make install-check``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import newest_python  # beside this script

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "install-check"
SUPPORTED = ((3, 11), (3, 12), (3, 13))


def stamps(where: Path, minor: tuple[int, int]) -> tuple[dict[str, str], list[str]]:
    """The Makefile variables that put every environment under ``where``, and the stamps
    (targets) to make there: ``.venv`` with its test tools and ``.venv-tpu`` on every Python, the
    newest-JAX leg's environments on the Pythons it runs on."""
    envs = {
        "VENV": where / "venv",
        "TPU_VENV": where / "venv-tpu",
        "NEWEST_VENV": where / "venv-newest",
        "NEWEST_TPU_VENV": where / "venv-newest-tpu",
    }
    targets = [envs["VENV"] / ".installed", envs["TPU_VENV"] / ".installed"]
    if minor in newest_python.MINORS:
        targets += [envs["NEWEST_VENV"] / ".full", envs["NEWEST_TPU_VENV"] / ".installed"]
    return {k: str(v) for k, v in envs.items()}, [str(t) for t in targets]


def sdists(reports: list[Path]) -> dict[str, str]:
    """``name -> version`` of every source distribution the dry runs would install."""
    found: dict[str, str] = {}
    for report in reports:
        for item in json.loads(report.read_text()).get("install", []):
            info = item.get("download_info", {})
            if "dir_info" in info or info.get("url", "").endswith(".whl"):
                continue
            found[item["metadata"]["name"]] = item["metadata"]["version"]
    return found


def check(minor: tuple[int, int], python: str) -> tuple[bool, str]:
    """Run the install steps for one Python; ``(ok, one line or pip's error)``."""
    label = f"Python {minor[0]}.{minor[1]}"
    where = OUT / f"{minor[0]}.{minor[1]}"
    shutil.rmtree(where, ignore_errors=True)
    cache = where / "pip-cache"
    cache.mkdir(parents=True)
    env = {**os.environ, "PIP_CACHE_DIR": str(cache)}
    env.pop("PIP_NO_CACHE_DIR", None)
    variables, targets = stamps(where, minor)
    # $@ is the stamp being made; $$$$ the recipe line's shell PID, so each install step
    # writes its own report.
    dry = "install --dry-run --report $@.$$$$.json"
    cmd = ["make", "--no-print-directory", "-C", str(ROOT), f"PIP_INSTALL={dry}"]
    cmd += [f"PYTHON={python}", f"NEWEST_PYTHON={python}"]
    cmd += [f"{k}={v}" for k, v in variables.items()] + targets
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return False, f"{label}: the install steps failed:\n{_pip_error(proc)}"
    built = sdists(sorted(where.glob("**/*.json")))
    # Each source distribution built as the install builds it: by the environment's own
    # build tools (no build isolation), with the pins, from an empty cache.
    build_python = Path(variables["VENV"]) / "bin" / "python"
    for name, version in sorted(built.items()):
        wheel = [str(build_python), "-m", "pip", "--disable-pip-version-check", "-q", "wheel"]
        wheel += ["--no-deps", "--no-build-isolation", "-c", str(ROOT / "constraints.txt")]
        wheel += ["-w", str(where / "wheels"), f"{name}=={version}"]
        proc = subprocess.run(wheel, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            return False, f"{label}: {name} {version} did not build:\n{_pip_error(proc)}"
    names = ", ".join(f"{n} {v}" for n, v in sorted(built.items())) or "none"
    seconds = time.perf_counter() - start
    return True, (
        f"{label} ({python}): {len(targets)} environments resolve from an empty cache; "
        f"source distributions built: {names} ({seconds:.0f} s)"
    )


def _pip_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = (proc.stdout + proc.stderr).splitlines()
    # pip's warnings about index locations that do not exist on this machine are noise here.
    kept = [line for line in lines if not line.startswith("WARNING: Location")]
    return "\n".join(kept[-40:])


def _minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("minors", nargs="*", help="Pythons to check (default: every supported)")
    parser.add_argument("--keep", action="store_true", help="keep build/install-check/")
    args = parser.parse_args()
    wanted = [_minor(m) for m in args.minors] or list(SUPPORTED)
    failed = False
    for minor in wanted:
        python = newest_python.interpreter(minor)
        if python is None:
            print(f"Python {minor[0]}.{minor[1]}: not found here, not checked", flush=True)
            continue
        ok, line = check(minor, python)
        print(line, flush=True)
        failed |= not ok
        # Each Python's environments and pip cache (several GB with torch's wheels) go before
        # the next Python's are made, so the check needs the disk of one Python at a time.
        if not args.keep:
            shutil.rmtree(OUT / f"{minor[0]}.{minor[1]}", ignore_errors=True)
    if not args.keep:
        shutil.rmtree(OUT, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
