"""The kernel registry: kernels found through the ``zoo.attention_kernels`` entry points.

This is the only global state in zoo. It is filled lazily on first use so that importing
``zoo_attention`` stays cheap and a broken kernel package cannot break the import.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import threading

from ._kernel import CONTRACT_VERSION, AttentionKernel

ENTRY_POINT_GROUP = "zoo.attention_kernels"

logger = logging.getLogger("zoo_attention")


class KernelRegistrationError(ValueError):
    """A kernel could not be registered (wrong type, duplicate name, other contract major)."""


@dataclasses.dataclass(frozen=True)
class RefusedKernel:
    """An installed kernel that was not registered, and why."""

    name: str
    distribution: str
    version: str
    reason: str


_lock = threading.Lock()
_kernels: dict[str, AttentionKernel] = {}
_refused: dict[str, RefusedKernel] = {}
_loaded = False


def _major(version: str) -> str:
    return version.split(".")[0]


def _validate(kernel: object) -> AttentionKernel:
    if not isinstance(kernel, AttentionKernel):
        raise KernelRegistrationError(
            f"{kernel!r} is not a zoo_attention.AttentionKernel instance."
        )
    if _major(kernel.contract_version) != _major(CONTRACT_VERSION):
        raise KernelRegistrationError(
            f"kernel {kernel.name!r} implements attention contract {kernel.contract_version}, "
            f"but the installed zoo-attention provides contract {CONTRACT_VERSION}; "
            f"install a {kernel.name!r} release built for contract {_major(CONTRACT_VERSION)}.x."
        )
    return kernel


def register_kernel(kernel: AttentionKernel, *, replace: bool = False) -> AttentionKernel:
    """Register a kernel object directly (for kernels defined in code rather than packages).

    Raises:
        KernelRegistrationError: if the kernel implements another contract major version, or
            the name is taken and ``replace`` is false.
    """
    _ensure_loaded()
    _validate(kernel)
    with _lock:
        if kernel.name in _kernels and not replace:
            raise KernelRegistrationError(f"a kernel named {kernel.name!r} is already registered.")
        _kernels[kernel.name] = kernel
    return kernel


def unregister_kernel(name: str) -> None:
    """Remove a kernel registered under ``name`` (no error if there is none)."""
    _ensure_loaded()
    with _lock:
        _kernels.pop(name, None)


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> None:
    dist = ep.dist.name if ep.dist is not None else "?"
    version = ep.dist.version if ep.dist is not None else "0+unknown"
    try:
        kernel = _validate(ep.load())
    except Exception as err:  # a broken plug-in must not break attention for everyone
        reason = (
            str(err) if isinstance(err, KernelRegistrationError) else f"failed to load: {err!r}"
        )
        _refused[ep.name] = RefusedKernel(ep.name, dist, version, reason)
        logger.warning(
            "zoo_attention: refused kernel %r from %s %s: %s", ep.name, dist, version, reason
        )
        return
    if kernel.version == AttentionKernel.version:
        kernel.version = version
    if kernel.name in _kernels:
        other = _kernels[kernel.name]
        _refused[f"{ep.name}@{dist}"] = RefusedKernel(
            ep.name, dist, version, f"name already provided by version {other.version}"
        )
        logger.warning(
            "zoo_attention: two packages provide kernel %r; keeping %s",
            kernel.name,
            other.describe(),
        )
        return
    _kernels[kernel.name] = kernel


def _ensure_loaded() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for ep in sorted(
            importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name
        ):
            _load_entry_point(ep)
        if "xla" not in _kernels:  # the reference is always there, even from a bare source tree
            from ._xla import KERNEL

            KERNEL.version = _own_version()
            _kernels["xla"] = KERNEL
        _loaded = True


def _own_version() -> str:
    try:
        return importlib.metadata.version("zoo-attention")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def reload_kernels() -> dict[str, AttentionKernel]:
    """Forget every kernel and scan the entry points again (after installing a package)."""
    global _loaded
    with _lock:
        _kernels.clear()
        _refused.clear()
        _loaded = False
    return kernels()


def get_kernel(name: str) -> AttentionKernel:
    """The registered kernel called ``name``.

    Raises:
        ValueError: naming the known kernels (and why a refused one was refused).
    """
    _ensure_loaded()
    try:
        return _kernels[name]
    except KeyError:
        pass
    refused = [r for r in _refused.values() if r.name == name]
    if refused:
        raise ValueError(f"kernel {name!r} is installed but was refused: {refused[0].reason}")
    raise ValueError(
        f"unknown attention implementation {name!r}; known kernels: {', '.join(sorted(_kernels))}."
    )


def kernels() -> dict[str, AttentionKernel]:
    """All registered kernels by name."""
    _ensure_loaded()
    return dict(_kernels)


def refused_kernels() -> list[RefusedKernel]:
    """Installed kernels that were not registered, with the reason."""
    _ensure_loaded()
    return list(_refused.values())
