"""An environment of its own with pinned zoo releases and the rest of zoo from this tree.

Usage: python scripts/pinned_env.py DIR PIN [PIN ...]    (``make pinned PIN=...``)

e.g. ``python scripts/pinned_env.py .venv-pinned zoo-flash-tpu==0.1.1``. The pins are
released versions, served from ``wheelhouse/`` (built here first, from ``releases.toml``); every
other zoo package is the working tree's, as a wheel; third-party packages follow
``constraints.txt``. DIR is created when missing and otherwise changed in place, so running
it again with another pin upgrades or rolls back that package alone. The development
environment ``.venv`` is never touched: its packages stay the tree's, editable.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from packaging.specifiers import SpecifierSet
from release_table import PACKAGE_DIRS, ROOT, distribution, field, read_table
from wheelhouse import pip_wheel

WHEELHOUSE = ROOT / "wheelhouse"
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(==|>=|<=|~=|<|>|!=)")


def pinned_name(pin: str) -> str:
    """The distribution a pin names (``"zoo-flash-tpu==0.1.1"`` → ``"zoo-flash-tpu"``)."""
    match = _PIN.match(pin)
    if match is None:
        raise ValueError(f"{pin!r} is not a pin; write NAME==VERSION, e.g. zoo-flash-tpu==0.1.1.")
    return match.group(1).lower().replace("_", "-")


def tree_dirs(root: Path = ROOT) -> list[str]:
    """The package directories this interpreter can install (their ``requires-python`` admits
    it): zoo-tokamax, for one, needs Python >= 3.12."""
    here = ".".join(map(str, sys.version_info[:3]))
    dirs = []
    for directory in PACKAGE_DIRS:
        needs = field((root / directory / "pyproject.toml").read_text(), "requires-python")
        if needs is None or SpecifierSet(needs).contains(here):
            dirs.append(directory)
    return dirs


def requirements(pins: list[str], root: Path = ROOT) -> list[str]:
    """What to install: each tree package this Python can install and that is not pinned, at
    its tree version (``name==version``), then the pins."""
    pinned = {pinned_name(p) for p in pins}
    known = {distribution(d, root) for d in PACKAGE_DIRS}
    unknown = sorted(pinned - known)
    if unknown:
        raise ValueError(
            f"{unknown[0]} is not a zoo package; pin one of {', '.join(sorted(known))}."
        )
    released = read_table(root)
    for pin in pins:
        asked, versions = pin.split("==", 1)[-1].strip(), list(released.get(pinned_name(pin), {}))
        if "==" in pin and asked not in versions:
            raise ValueError(
                f"{pinned_name(pin)} {asked} is not a release (releases.toml records "
                f"{', '.join(versions) or 'none'}); pin one of those."
            )
    tree = []
    for directory in tree_dirs(root):
        name = distribution(directory, root)
        if name not in pinned:
            version = field((root / directory / "pyproject.toml").read_text(), "version")
            tree.append(f"{name}=={version}")
    return [*tree, *pins]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        latest = {name: list(versions)[-1] for name, versions in read_table().items()}
        print(
            "pinned_env: name the release to pin, e.g. make pinned "
            f"PIN='zoo-flash-tpu=={latest.get('zoo-flash-tpu', 'X.Y.Z')}' (latest releases: "
            + ", ".join(f"{n} {v}" for n, v in sorted(latest.items()))
            + ").",
            file=sys.stderr,
        )
        return 2
    target, pins = Path(argv[0]), argv[1:]
    try:
        wanted = requirements(pins)
    except ValueError as e:
        print(f"pinned_env: {e}", file=sys.stderr)
        return 2
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "wheelhouse.py"), "--out", str(WHEELHOUSE)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    if not (target / "bin" / "python").exists():
        venv.EnvBuilder(with_pip=False).create(target)
    with tempfile.TemporaryDirectory(prefix="zoo-tree-wheels-") as tmp:
        pinned = {pinned_name(p) for p in pins}
        for directory in tree_dirs():
            if distribution(directory) not in pinned:
                pip_wheel(ROOT / directory, Path(tmp))
        cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
        cmd += ["--python", str(target / "bin" / "python"), "install"]
        cmd += ["-c", str(ROOT / "constraints.txt"), "--find-links", tmp]
        cmd += ["--find-links", str(WHEELHOUSE), *wanted]
        code = subprocess.call(cmd)
    if code != 0:
        return code
    print(f"{target}: {', '.join(pins)}, the rest of zoo from this tree:")
    return subprocess.call([str(target / "bin" / "zoo"), "kernels"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
