"""The kernel registries: kernels found through entry points, one registry per kind of kernel.

Attention kernels (entry-point group ``zoo.attention_kernels``) and grouped-matmul kernels
(``zoo.grouped_matmul_kernels``) are found, checked against their contract and kept by the same
:class:`KernelRegistry`. The registries are the only global state in zoo. Each is filled lazily
on first use, so that importing ``zoo_attention`` stays cheap and a broken kernel package cannot
break the import.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import logging
import threading
from typing import Generic, TypeVar, cast

from ._base import Kernel
from ._kernel import CONTRACT_VERSION, AttentionKernel

ENTRY_POINT_GROUP = "zoo.attention_kernels"

logger = logging.getLogger("zoo_attention")

K = TypeVar("K", bound=Kernel)


class KernelRegistrationError(ValueError):
    """A kernel could not be registered (wrong type, duplicate name, other contract major)."""


@dataclasses.dataclass(frozen=True)
class RefusedKernel:
    """An installed kernel that was not registered, and why."""

    name: str
    distribution: str
    version: str
    reason: str


def _major(version: str) -> str:
    return version.split(".")[0]


def distribution_version(distribution: str) -> str:
    """The installed version of ``distribution`` (``"0+unknown"`` when it is not installed)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


class KernelRegistry(Generic[K]):
    """The kernels of one kind, by name.

    Args:
        kind: what the kernels compute, in messages (``"attention"``, ``"grouped matmul"``).
        group: the entry-point group kernel packages register under.
        base: the (abstract) class every kernel of the kind subclasses; ``base_name`` its
            public name.
        contract_version: the kind's contract; a kernel of another major is refused.
        reference: the name of the reference kernel, loaded from ``reference_path``
            (``"module:attribute"``) when no entry point provides it, so it is there even in a
            source tree run without installing (see :meth:`provide`).
    """

    def __init__(
        self,
        *,
        kind: str,
        group: str,
        base: type,
        base_name: str,
        contract_version: str,
        reference: str,
        reference_path: str,
    ) -> None:
        self.kind = kind
        self.group = group
        self.base = base
        self.base_name = base_name
        self.contract_version = contract_version
        self.reference = reference
        self.reference_path = reference_path
        # Re-entrant: loading a kernel's entry point imports its package, which may itself
        # provide kernels of this registry (zoo-layers provides `tiled` on import).
        self._lock = threading.RLock()
        self._kernels: dict[str, K] = {}
        self._refused: dict[str, RefusedKernel] = {}
        # name -> ("module:attribute", distribution): registered where no entry point is.
        self._provided: dict[str, tuple[str, str]] = {reference: (reference_path, "zoo-attention")}
        self._loaded = False

    def _validate(self, obj: object) -> K:
        if not isinstance(obj, self.base):
            raise KernelRegistrationError(f"{obj!r} is not a {self.base_name} instance.")
        kernel = cast(K, obj)
        if _major(kernel.contract_version) != _major(self.contract_version):
            raise KernelRegistrationError(
                f"kernel {kernel.name!r} implements {self.kind} contract "
                f"{kernel.contract_version}, but the installed zoo-attention provides contract "
                f"{self.contract_version}; install a {kernel.name!r} release built for contract "
                f"{_major(self.contract_version)}.x."
            )
        return kernel

    def register(self, kernel: K, *, replace: bool = False) -> K:
        """Register a kernel object directly (for kernels defined in code rather than packages).

        Raises:
            KernelRegistrationError: if the kernel is not of this kind, implements another
                contract major version, or the name is taken and ``replace`` is false.
        """
        self._ensure_loaded()
        self._validate(kernel)
        with self._lock:
            if kernel.name in self._kernels and not replace:
                raise KernelRegistrationError(
                    f"a kernel named {kernel.name!r} is already registered."
                )
            self._kernels[kernel.name] = kernel
        return kernel

    def unregister(self, name: str) -> None:
        """Remove a kernel registered under ``name`` (no error if there is none)."""
        self._ensure_loaded()
        with self._lock:
            self._kernels.pop(name, None)

    def _load_entry_point(self, ep: importlib.metadata.EntryPoint) -> None:
        dist = ep.dist.name if ep.dist is not None else "?"
        version = ep.dist.version if ep.dist is not None else "0+unknown"
        try:
            kernel = self._validate(ep.load())
        except Exception as err:  # a broken plug-in must not break the others
            reason = (
                str(err) if isinstance(err, KernelRegistrationError) else f"failed to load: {err!r}"
            )
            self._refused[ep.name] = RefusedKernel(ep.name, dist, version, reason)
            logger.warning(
                "zoo_attention: refused kernel %r from %s %s: %s", ep.name, dist, version, reason
            )
            return
        if kernel.version == Kernel.version:
            kernel.version = version
        if kernel.name in self._kernels:
            other = self._kernels[kernel.name]
            self._refused[f"{ep.name}@{dist}"] = RefusedKernel(
                ep.name, dist, version, f"name already provided by version {other.version}"
            )
            logger.warning(
                "zoo_attention: two packages provide kernel %r; keeping %s",
                kernel.name,
                other.describe(),
            )
            return
        self._kernels[kernel.name] = kernel

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            found = importlib.metadata.entry_points(group=self.group)
            for ep in sorted(found, key=lambda e: e.name):
                self._load_entry_point(ep)
            for name in list(self._provided):
                self._load_provided(name)
            self._loaded = True

    def _load_provided(self, name: str) -> None:
        if name in self._kernels:
            return
        path, distribution = self._provided[name]
        module, attribute = path.split(":")
        kernel = self._validate(getattr(importlib.import_module(module), attribute))
        kernel.version = distribution_version(distribution)
        self._kernels[name] = kernel

    def provide(self, name: str, path: str, distribution: str) -> None:
        """Have kernel ``name`` (the object at ``path``, ``"module:attribute"``, of the
        distribution ``distribution``) registered when no entry point provides it: a package
        run from a source tree, without its entry points installed, still registers its
        kernels. Nothing is imported before the registry is first used."""
        with self._lock:
            self._provided[name] = (path, distribution)
            if self._loaded:
                self._load_provided(name)

    def reload(self) -> dict[str, K]:
        """Forget every kernel and scan the entry points again (after installing a package)."""
        with self._lock:
            self._kernels.clear()
            self._refused.clear()
            self._loaded = False
        return self.kernels()

    def get(self, name: str) -> K:
        """The registered kernel called ``name``.

        Raises:
            ValueError: naming the known kernels (and why a refused one was refused).
        """
        self._ensure_loaded()
        try:
            return self._kernels[name]
        except KeyError:
            pass
        refused = [r for r in self._refused.values() if r.name == name]
        if refused:
            raise ValueError(f"kernel {name!r} is installed but was refused: {refused[0].reason}")
        raise ValueError(
            f"unknown {self.kind} implementation {name!r}; known kernels: "
            f"{', '.join(sorted(self._kernels))}."
        )

    def kernels(self) -> dict[str, K]:
        """All registered kernels by name."""
        self._ensure_loaded()
        return dict(self._kernels)

    def refused(self) -> list[RefusedKernel]:
        """Installed kernels that were not registered, with the reason."""
        self._ensure_loaded()
        return list(self._refused.values())


#: The attention kernels.
ATTENTION: KernelRegistry[AttentionKernel] = KernelRegistry(
    kind="attention",
    group=ENTRY_POINT_GROUP,
    base=AttentionKernel,
    base_name="zoo_attention.AttentionKernel",
    contract_version=CONTRACT_VERSION,
    reference="xla",
    reference_path="zoo_attention._xla:KERNEL",
)


def register_kernel(kernel: AttentionKernel, *, replace: bool = False) -> AttentionKernel:
    """Register an attention kernel object directly (for kernels defined in code rather than
    packages).

    Raises:
        KernelRegistrationError: if the kernel implements another contract major version, or
            the name is taken and ``replace`` is false.
    """
    return ATTENTION.register(kernel, replace=replace)


def unregister_kernel(name: str) -> None:
    """Remove an attention kernel registered under ``name`` (no error if there is none)."""
    ATTENTION.unregister(name)


def reload_kernels() -> dict[str, AttentionKernel]:
    """Forget every attention kernel and scan the entry points again (after installing a
    package)."""
    return ATTENTION.reload()


def get_kernel(name: str) -> AttentionKernel:
    """The registered attention kernel called ``name``.

    Raises:
        ValueError: naming the known kernels (and why a refused one was refused).
    """
    return ATTENTION.get(name)


def kernels() -> dict[str, AttentionKernel]:
    """All registered attention kernels by name."""
    return ATTENTION.kernels()


def refused_kernels() -> list[RefusedKernel]:
    """Installed attention kernels that were not registered, with the reason."""
    return ATTENTION.refused()
