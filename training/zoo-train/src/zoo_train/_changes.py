"""What changed between the run that wrote a checkpoint and the current one."""

from __future__ import annotations

from typing import Any

from ._provenance import kernel_label


def provenance_changes(saved: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """One line per difference in the attention and grouped-matmul kernels, zoo package versions
    and jax version.

    Args:
        saved: the ``provenance`` of a checkpoint's metadata (``None``: nothing to compare).
        now: the current run's provenance (after the loss was traced, so kernels are resolved).

    Returns:
        Lines such as ``"attention kernel: flash_tpu 0.1.0 -> xla 1.0.0"``, ``"grouped matmul:
        ragged_dot 1.2.0 -> megablox 0.1.0"``, ``"linear attention: deltanet_tpu 0.1.0 ->
        chunked_xla 1.0.0"`` or ``"zoo-models: 0.1.0 -> 0.2.0"``; empty when
        nothing changed.
    """
    if not saved:
        return []
    lines = []
    kinds = (
        ("attention", "attention kernel"),
        ("grouped_matmul", "grouped matmul"),
        ("cross_entropy", "cross entropy"),
        ("linear_attention", "linear attention"),
    )
    for key, what in kinds:
        if key not in saved and key != "attention":
            continue  # before the kind was recorded, or a model without gated DeltaNet layers
        old_kernel = kernel_label(saved.get(key) or [])
        new_kernel = kernel_label(now.get(key) or [])
        if old_kernel != new_kernel:
            lines.append(f"{what}: {old_kernel} -> {new_kernel}")
    old_pkgs, new_pkgs = saved.get("packages") or {}, now.get("packages") or {}
    for name in sorted(set(old_pkgs) | set(new_pkgs)):
        old, new = old_pkgs.get(name, "not installed"), new_pkgs.get(name, "not installed")
        if old != new:
            lines.append(f"{name}: {old} -> {new}")
    if saved.get("jax") != now.get("jax"):
        lines.append(f"jax: {saved.get('jax', 'unknown')} -> {now.get('jax', 'unknown')}")
    if saved.get("backend") != now.get("backend"):
        lines.append(
            f"backend: {saved.get('backend', 'unknown')} -> {now.get('backend', 'unknown')}"
        )
    return lines
