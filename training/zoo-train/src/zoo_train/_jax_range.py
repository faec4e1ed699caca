"""Which JAX this process runs on, and which JAX each kernel release (attention or grouped
matmul) was verified on.

A kernel release declares the JAX range it was verified on as its distribution's ``jax``
requirement (``docs/compatibility.md`` records the verification). ``zoo kernels`` shows both and
warns about a kernel that runs outside its range: a package installed with ``--no-deps``, or
into an environment whose JAX was changed after it.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import sys

from packaging.requirements import InvalidRequirement, Requirement

#: The libraries that decide whether a kernel compiles and runs: JAX, its XLA, and the TPU
#: compiler where installed.
JAX_LIBRARIES = ("jax", "jaxlib", "libtpu")
_REFERENCE_DISTRIBUTION = "zoo-attention"


@dataclasses.dataclass(frozen=True)
class Kind:
    """A kind of kernel, as its distributions' metadata shows it (read without importing JAX).

    Attributes:
        name: ``"attention"``, ``"grouped_matmul"``, ``"cross_entropy"`` or
            ``"linear_attention"`` (a resolution's ``kind``).
        group: the entry-point group its kernels register under
            (``zoo_attention.ENTRY_POINT_GROUP``, ``zoo_attention.grouped.ENTRY_POINT_GROUP``).
        reference: its reference kernel, registered by zoo-attention even without its entry
            point.
        since: the first zoo-attention version with this kind's contract.
    """

    name: str
    group: str
    reference: str
    since: str


ATTENTION = Kind("attention", "zoo.attention_kernels", "xla", "1.0.0")
GROUPED_MATMUL = Kind("grouped_matmul", "zoo.grouped_matmul_kernels", "ragged_dot", "1.2.0")
CROSS_ENTROPY = Kind("cross_entropy", "zoo.cross_entropy_kernels", "logits", "1.3.0")
LINEAR_ATTENTION = Kind("linear_attention", "zoo.linear_attention_kernels", "chunked_xla", "1.3.0")
#: In the order ``zoo kernels`` lists them (by name).
KINDS = (ATTENTION, CROSS_ENTROPY, GROUPED_MATMUL, LINEAR_ATTENTION)


def installed_versions(names: tuple[str, ...]) -> dict[str, str]:
    """The installed version of each distribution in ``names`` that is installed here."""
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def running_jax() -> dict[str, str]:
    """``{"jax": "0.12.0.1", "jaxlib": ..., "libtpu": ...}`` for those installed here."""
    return installed_versions(JAX_LIBRARIES)


def describe_running_jax() -> str:
    """One line: ``jax 0.12.0.1, jaxlib 0.12.0.1, no libtpu; Python 3.12.1``."""
    found = running_jax()
    parts = [f"{n} {found[n]}" if n in found else f"no {n}" for n in JAX_LIBRARIES]
    return f"{', '.join(parts)}; Python {sys.version.split()[0]}"


def _distribution_of(kernel: str, kind: Kind) -> importlib.metadata.Distribution | None:
    for ep in importlib.metadata.entry_points(group=kind.group):
        if ep.name == kernel and ep.dist is not None:
            return ep.dist
    if kernel == kind.reference:  # the reference, always there even without its entry point
        try:
            return importlib.metadata.distribution(_REFERENCE_DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            return None
    return None


def declared_range(kernel: str, requirement: str, kind: Kind = ATTENTION) -> str | None:
    """The range (``">=0.10.2,<0.13"``) that ``kernel``'s release declares on the distribution
    ``requirement``, or ``None`` when it declares none or is not installed from a distribution."""
    dist = _distribution_of(kernel, kind)
    for line in (dist.requires or []) if dist is not None else []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name == requirement and req.marker is None and len(req.specifier):
            # Lower bounds first, as people write a range.
            ordered = sorted(req.specifier, key=lambda s: (not s.operator.startswith(">"), str(s)))
            return ",".join(str(s) for s in ordered)
    return None


def verified_jax(kernel: str, kind: Kind = ATTENTION) -> str | None:
    """The JAX range (``">=0.10.2,<0.13"``) that ``kernel``'s release declares (its verified
    range), or ``None`` when it declares none or is not installed from a distribution."""
    return declared_range(kernel, "jax", kind)


def outside_verified_range(kernel: str, version: str, kind: Kind = ATTENTION) -> str | None:
    """One sentence when the running JAX is outside ``kernel``'s verified range, else ``None``."""
    declared = verified_jax(kernel, kind)
    jax_version = running_jax().get("jax")
    if declared is None or jax_version is None:
        return None
    if Requirement(f"jax{declared}").specifier.contains(jax_version, prereleases=True):
        return None
    return (
        f"{kernel} {version} was verified on jax{declared}, not on the running jax {jax_version}: "
        f"check it here with `zoo kernels verify {kernel}`, or install a release verified on "
        "this JAX (docs/compatibility.md lists them)."
    )


#: The attention reference kernel's name: registered with the contract, always there.
REFERENCE = ATTENTION.reference


def warn_outside_verified_range(name: str, version: str, kind: Kind = ATTENTION) -> None:
    """One ``zoo:`` line on stderr when the running JAX is outside the kernel's verified range."""
    warning = outside_verified_range(name, version, kind)
    if warning:
        print(f"zoo: {warning}", file=sys.stderr)
