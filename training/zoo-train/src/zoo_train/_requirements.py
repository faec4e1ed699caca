"""Kernel version requirements of a run (``attention.require``), checked before training."""

from __future__ import annotations

import importlib.metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

import zoo_attention

from ._usage import UsageError


def _installed_version(name: str) -> str | None:
    """The version of distribution ``name``, else of a registered kernel of that name."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        pass

    wanted = canonicalize_name(name)
    for kernel_name, kernel in zoo_attention.kernels().items():
        if canonicalize_name(kernel_name) == wanted:
            return kernel.version
    return None


def check_requirement(text: str) -> str:
    """Check a requirement such as ``"zoo-flash-tpu>=0.1,<0.2"`` against what is installed.

    The name is a distribution (``zoo-flash-tpu``) or a kernel name (``flash_tpu``).

    Returns:
        The installed version.

    Raises:
        UsageError: the text is not a requirement, the package is not installed, or its
            version is outside the range.
    """
    try:
        req = Requirement(text)
    except InvalidRequirement:
        raise UsageError(
            f"attention.require {text!r} is not a version requirement; write e.g. "
            "'zoo-flash-tpu>=0.1,<0.2'."
        ) from None
    version = _installed_version(req.name)
    if version is None:
        raise UsageError(
            f"The run requires {text} but {req.name} is not installed; install it or change "
            "attention.require."
        )
    if not req.specifier.contains(version, prereleases=True):
        raise UsageError(
            f"The run requires {text} but {req.name} {version} is installed; install a matching "
            "version or change attention.require."
        )
    return version
