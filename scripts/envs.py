"""Fresh virtual environments built from zoo wheels, for the compatibility tests and matrix.

Third-party packages are not downloaded again: each environment sees the main ``.venv``'s
third-party packages through a directory of links that leaves out every zoo distribution, so
what zoo code an environment runs is exactly the wheels installed into it. The test tools
(pytest and its plugins) are left out too: no zoo wheel depends on them, so a user who
installs the wheels does not have them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from wheelhouse import pip_wheel

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {
    "zoo-attention": "packages/zoo-attention",
    "zoo-flash-tpu": "kernels/flash-tpu",
    "zoo-chunked": "kernels/chunked",
    "zoo-splash": "kernels/splash",
    "zoo-megablox": "kernels/megablox",
    "zoo-deltanet-tpu": "kernels/deltanet-tpu",
    "zoo-layers": "packages/zoo-layers",
    "zoo-data": "data/zoo-data",
    "zoo-models": "models/zoo-models",
    "zoo-train": "training/zoo-train",
}
#: Packages of the newest-JAX leg alone (Python >= 3.12): zoo-tokamax (tokamax needs
#: jax >= 0.11.1).
NEWEST_PACKAGES = {"zoo-tokamax": "kernels/tokamax"}


def leg_packages() -> dict[str, str]:
    """The zoo packages this interpreter's leg installs: :data:`PACKAGES`, and on Python >= 3.12
    :data:`NEWEST_PACKAGES` too."""
    return {**PACKAGES, **(NEWEST_PACKAGES if sys.version_info >= (3, 12) else {})}


#: Test tools of the main environment that no zoo wheel declares (top-level names).
TEST_TOOLS = ("pytest", "_pytest", "pytest_xdist", "xdist", "pluggy", "iniconfig", "py.py")


def _is_zoo(name: str) -> bool:
    lowered = name.lower().replace("-", "_")
    return lowered.startswith(("zoo_", "_zoo_", "__editable__")) or lowered.endswith(".pth")


def _is_test_tool(name: str) -> bool:
    top = name.split("-")[0].lower() if name.endswith(".dist-info") else name.lower()
    return top in TEST_TOOLS


def third_party_site(into: Path, *, test_tools: bool = False) -> Path:
    """A directory linking this interpreter's site-packages except zoo's own and (unless
    ``test_tools``) the test tools."""
    site = Path(sysconfig.get_paths()["purelib"])
    into.mkdir(parents=True, exist_ok=True)
    for entry in site.iterdir():
        left_out = _is_zoo(entry.name) or entry.name == "__pycache__"
        if not (left_out or (_is_test_tool(entry.name) and not test_tools)):
            (into / entry.name).symlink_to(entry)
    return into


def build_wheel(source: Path, dist: Path) -> Path:
    """Build one package's wheel (no dependencies, no isolated build) into ``dist``."""
    dist.mkdir(parents=True, exist_ok=True)
    before = set(dist.glob("*.whl"))
    pip_wheel(source, dist)
    (wheel,) = set(dist.glob("*.whl")) - before
    return wheel


def make_env(
    path: Path,
    site: Path,
    wheels: list[Path],
    *,
    pins: tuple[str, ...] | list[str] = (),
    find_links: tuple[Path, ...] | list[Path] = (),
    interpreter: Path | None = None,
) -> Path:
    """Create a venv at ``path`` seeing ``site`` and install ``wheels`` (resolving zoo's ranges).

    ``pins`` are further requirements (``"zoo-flash-tpu==0.1.1"``) found in the ``find_links``
    directories, as a user installs a pin from a wheelhouse. Returns the environment's python.
    Dependencies between the wheels are resolved by pip against the versions offered, so an
    incompatible set fails here, as it would for a user. ``interpreter`` creates the venv
    (default: this Python); it must be the Python of the environment ``site`` belongs to.
    """
    if interpreter is None:
        venv.EnvBuilder(with_pip=False).create(path)
    else:  # another Python than this one: that of the environment ``site`` belongs to
        subprocess.run([str(interpreter), "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "zoo_third_party.pth").write_text(f"{site}\n")
    links = sorted({str(w.parent) for w in wheels} | {str(d) for d in find_links})
    # Exactly these wheels: name==version, so a newer wheel beside one cannot be picked instead.
    names = ["{}=={}".format(*w.name.split("-")[:2]).replace("_", "-") for w in wheels]
    names += list(pins)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "--disable-pip-version-check",
        "-q",
        "--python",
        str(python),
        "install",
        "--no-index",
        *[f"--find-links={d}" for d in links],
        *names,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"installing {names} failed:\n{proc.stdout}\n{proc.stderr}")
    return python


def installed_zoo(python: Path) -> dict[str, str]:
    """The zoo distributions (name → version) an environment's python sees."""
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() "
        "if d.metadata['Name'].startswith('zoo-')}))"
    )
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def run(
    python: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python args...`` with a clean zoo environment (no ZOO_* leaking in from outside)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ZOO_") and k != "PYTHONPATH"}
    return subprocess.run(
        [str(python), *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
    )
