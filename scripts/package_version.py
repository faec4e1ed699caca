"""A package's version where it is written: ``pyproject.toml``, ``__version__`` and CHANGELOG.md.

The version lives in two files of a package directory that must agree: ``pyproject.toml``
(what pip installs and ``importlib.metadata`` reports) and ``src/<module>/__init__.py``'s
``__version__`` (what the module says of itself). Changes not yet released are listed under an
``## Unreleased`` heading at the top of CHANGELOG.md.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path

from packaging.version import Version
from release_table import field

UNRELEASED = "## Unreleased"
_VERSION_LINE = re.compile(r'^(version\s*=\s*)"[^"]+"', re.MULTILINE)
_DUNDER_LINE = re.compile(r'^(__version__\s*=\s*)"[^"]*"', re.MULTILINE)


def init_file(package: Path) -> Path:
    """``src/<module>/__init__.py`` of the package directory ``package``."""
    (init,) = sorted(package.glob("src/*/__init__.py"))
    return init


def version_of(package: Path) -> str:
    """The version in ``package``'s ``pyproject.toml``."""
    version = field((package / "pyproject.toml").read_text(), "version")
    if version is None:
        raise LookupError(f"{package}/pyproject.toml has no version")
    return version


def dunder_version(package: Path) -> str | None:
    """``__version__`` in ``package``'s module, or None when it sets none."""
    match = re.search(r'^__version__\s*=\s*"([^"]*)"', init_file(package).read_text(), re.M)
    return match.group(1) if match else None


def set_version(package: Path, version: str) -> None:
    """Write ``version`` into ``pyproject.toml`` and, where it has one, ``__version__``."""
    pyproject = package / "pyproject.toml"
    pyproject.write_text(_VERSION_LINE.sub(rf'\g<1>"{version}"', pyproject.read_text(), count=1))
    init = init_file(package)
    text = init.read_text()
    if _DUNDER_LINE.search(text):
        init.write_text(_DUNDER_LINE.sub(rf'\g<1>"{version}"', text, count=1))


def next_dev(released: str) -> str:
    """The development version after release ``released``: ``X.Y.Z`` → ``X.Y.(Z+1).dev0``."""
    major, minor, micro = (*Version(released).release, 0, 0)[:3]
    return f"{major}.{minor}.{micro + 1}.dev0"


def unreleased_notes(package: Path) -> str | None:
    """The text under CHANGELOG.md's ``## Unreleased`` heading, or None without one."""
    text = (package / "CHANGELOG.md").read_text()
    match = re.search(rf"^{UNRELEASED}[ \t]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1).strip() if match else None


def open_unreleased(package: Path) -> None:
    """Put an ``## Unreleased`` heading above the newest version's, unless there is one."""
    path = package / "CHANGELOG.md"
    if unreleased_notes(package) is not None:
        return
    text = path.read_text()
    first = re.search(r"^## ", text, re.M)
    at = first.start() if first else len(text)
    path.write_text(text[:at] + f"{UNRELEASED}\n\n" + text[at:])


def close_unreleased(package: Path, version: str, day: datetime.date) -> None:
    """Rename the ``## Unreleased`` heading to ``## VERSION — YYYY-MM-DD``."""
    path = package / "CHANGELOG.md"
    text = path.read_text()
    heading = f"## {version} — {day.isoformat()}"
    path.write_text(re.sub(rf"^{UNRELEASED}[ \t]*$", heading, text, count=1, flags=re.M))
