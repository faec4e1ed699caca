"""Refusing, before anything is allocated, a run whose state or batches cannot fit in memory.

A configuration can ask for any size (``--set model_config.n_layers=100000000``, ``--batch-size
1000000000``); building it would exhaust the host (the kernel's OOM killer ends the process with
no message) or die in XLA with a traceback. The estimates are floors: parameters, their
gradients and the optimizer's moments (float32), from the configuration alone
(``zoo_models.param_bytes`` extrapolates two small abstract models); and a step's batch as the
host makes it. Activations come on top, and ``zoo compile`` measures them for TPUs; these checks
only refuse what cannot fit at all.
"""

from __future__ import annotations

from typing import Any

import jax

import zoo_models

# float32 values the optimizer keeps per trained parameter (Adafactor's factored moments are
# a fraction of one: counted as none).
_OPTIMIZER_VALUES = {"adamw": 2, "sgd": 1, "adafactor": 0}


def state_bytes(model_config: Any, optimizer: str, *, full: bool = True) -> int:
    """Bytes of the parameters, plus, when every parameter trains (``full``), their gradients
    and the optimizer's state."""
    params = zoo_models.param_bytes(model_config)
    if not full:
        return params
    values = _OPTIMIZER_VALUES.get(optimizer, 2)
    return 2 * params + values * 4 * zoo_models.num_params(model_config)


def memory_of(mesh: Any) -> tuple[int | None, str]:
    """The memory of ``mesh``'s devices together, and how to name it. CPU devices share the
    host's memory, which counts once."""
    devices = list(mesh.devices.flat)
    # A process can only ask its own devices; the others are taken to be alike.
    local = [d for d in devices if d.process_index == jax.process_index()]
    limits = [(d.memory_stats() or {}).get("bytes_limit") for d in local]
    if local and all(limits):
        kind = devices[0].device_kind
        return sum(limit for limit in limits if limit) * len(devices) // len(
            local
        ), f"the memory of {len(devices)} {kind} device{'s' if len(devices) != 1 else ''}"
    hosts = len({d.process_index for d in devices})
    # A cgroup limit or `ulimit -v` may allow less than the host has; each host is taken to
    # allow what this one does.
    have, what = zoo_models.host_memory_limit()
    if hosts > 1 and have is not None:
        return have * hosts, f"the {hosts} hosts' memory"
    return have, what


def check_state_fits(model_config: Any, optimizer: str, mesh: Any, *, full: bool = True) -> None:
    """Refuse a run whose parameters and optimizer state exceed the memory of ``mesh``.

    Raises:
        zoo_models.DoesNotFitError: one sentence with the parameter count and both figures.
    """
    # zoo_train.aot loads Optax, which the inference paths that import this module skip.
    from .aot import gib

    need = state_bytes(model_config, optimizer, full=full)
    have, where = memory_of(mesh)
    if have is not None and need > have:
        raise zoo_models.DoesNotFitError(
            f"The model has {zoo_models.num_params(model_config):,} parameters: with "
            f"{'gradients and ' + optimizer + ' state' if full else 'nothing else'} that is at "
            f"least {gib(need)}, more than {where} ({gib(have)}); choose a "
            "smaller model_config or more devices."
        )


#: Host bytes per token of a step's batch: int32 input ids, targets, positions and segment ids
#: and float32 loss weights, each ``[rows, width]``.
BATCH_BYTES_PER_TOKEN = 20


def check_batch_fits(rows: int, width: int, lower: str, *, processes: int | None = None) -> None:
    """Refuse a step whose batch of ``rows`` rows of ``width`` tokens alone exceeds the memory
    this process may use on the host, where batches are made (``lower``: what to change). Each
    of ``processes`` (default: the run's) makes its share of the rows.

    Raises:
        zoo_models.DoesNotFitError: one sentence with both figures.
    """
    from .aot import gib

    processes = jax.process_count() if processes is None else processes
    rows = -(-rows // processes)
    need = rows * width * BATCH_BYTES_PER_TOKEN
    have, where = zoo_models.host_memory_limit()
    if have is not None and need > have:
        each = f" (each of {processes} processes' share)" if processes > 1 else ""
        raise zoo_models.DoesNotFitError(
            f"A step's batch of {rows:,} rows{each} of {width:,} tokens needs at least "
            f"{gib(need)} of host memory, more than {where} ({gib(have)}); {lower}."
        )


def free_memory() -> tuple[int | None, str]:
    """``(bytes, name)``: what the first device can still allocate (the host's memory, for
    this process, on CPU), and what limits it."""
    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    if stats.get("bytes_limit"):
        free = stats["bytes_limit"] - stats.get("bytes_in_use", 0)
        return free, f"the free memory of a {device.device_kind} device"
    return zoo_models.host_memory_free()
