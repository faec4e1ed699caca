"""``build_program``: the one place a run's steps are made, for the loop and ``zoo compile``."""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
from jax.sharding import Mesh

import zoo_attention
import zoo_layers

from .._loss import LossFn, loss_unit, make_lm_loss
from .._plan import StatePlan, plan_state
from .._precision import resolve_compute_dtype
from .._step import make_eval_step, make_train_step
from ..parallel import (
    MeshFunction,
    check_batch,
    check_experts,
    check_heads,
    check_recurrent,
    platform_of,
)
from ._spec import StepSpec


@dataclasses.dataclass(frozen=True)
class TrainProgram:
    """A run's steps, ready to trace: where and how it computes.

    Attributes:
        spec: what it was built from.
        mesh, rules: the device mesh and the sharding rules.
        compute_dtype: the dtype the default loss computes in.
        loss_fn: the loss (the spec's, or the default next-token loss).
        plan: the state's plan (optimizer, schedule, abstract sharded template).
        train_step: ``train_step(batch, state) -> (state, metrics)``, jitted, donating the
            state (``step.lower(batch, state)`` takes abstract arguments).
        eval_step: ``eval_step(batch, state) -> sums``.
    """

    spec: StepSpec
    mesh: Mesh
    rules: Any
    compute_dtype: Any
    loss_fn: LossFn
    plan: StatePlan
    train_step: MeshFunction
    eval_step: MeshFunction

    @property
    def unit(self) -> str:
        """What the loss's weight counts (``"tokens"``, ``"pairs"``)."""
        return loss_unit(self.loss_fn)

    def resolve_kernels(self, shapes: Any) -> dict[str, list[dict[str, Any]]]:
        """Trace the loss once (abstractly, under the mesh) on a micro-batch of the step's
        shapes so its kernels are resolved for the target and logged; the resolutions by kind:
        ``{"attention": [...], "grouped_matmul": [...], "cross_entropy": [...],
        "linear_attention": [...]}`` (``Resolution.as_dict()`` each; no grouped matmul without
        a mixture of experts, no linear attention without gated DeltaNet layers)."""
        rows = self.spec.config.batch_size
        micro = {k: jax.ShapeDtypeStruct((rows, *v.shape[1:]), v.dtype) for k, v in shapes.items()}
        with (
            zoo_attention.recording() as log,
            jax.set_mesh(self.mesh),
            zoo_layers.axis_rules(self.rules),
        ):
            eqx.filter_eval_shape(self.loss_fn, self.plan.template.model, micro, jax.random.key(0))
        return {
            "attention": [r.as_dict() for r in log],
            "grouped_matmul": [r.as_dict() for r in log.grouped_matmul],
            "cross_entropy": [r.as_dict() for r in log.cross_entropy],
            "linear_attention": [r.as_dict() for r in log.linear_attention],
        }


def build_program(spec: StepSpec) -> TrainProgram:
    """The steps of ``spec``: the mesh and rules (checked against the batch and the model's
    heads and experts), the loss, the state's plan, and the jitted train and evaluation steps.
    Nothing is allocated and nothing is compiled yet.

    Raises:
        ValueError: the batch, the heads or the experts do not split over the mesh.
    """
    config = spec.config
    mesh, rules = spec.layout()
    check_batch(config.batch_size, mesh, rules)
    compute_dtype = resolve_compute_dtype(config.compute_dtype, platform_of(mesh))
    loss_fn = spec.loss_fn
    if loss_fn is None:
        loss_fn = make_lm_loss(
            z_loss=config.z_loss,
            compute_dtype=compute_dtype,
            router_aux_loss=config.router_aux_loss,
            router_z_loss=config.router_z_loss,
        )
    plan = plan_state(spec.model, config, mesh, rules, trainable=spec.trainable)
    model_config: Any = getattr(plan.abstract_model, "config", None)
    if hasattr(model_config, "n_heads") and hasattr(model_config, "kv_heads"):  # a zoo model
        check_heads(model_config.n_heads, model_config.kv_heads, mesh, rules)
        check_experts(getattr(model_config, "n_experts", 0), mesh, rules)
        check_recurrent(getattr(model_config, "n_linear_layers", 0), mesh, rules)
    train_step = make_train_step(
        plan.optimizer,
        loss_fn,
        plan.schedule,
        grad_accum=config.grad_accum,
        mesh=mesh,
        rules=rules,
        packed_metrics=True,
    )
    eval_step = make_eval_step(loss_fn, mesh=mesh, rules=rules, optimizer=plan.optimizer)
    return TrainProgram(spec, mesh, rules, compute_dtype, loss_fn, plan, train_step, eval_step)
