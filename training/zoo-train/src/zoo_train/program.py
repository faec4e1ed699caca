"""Deprecated (zoo-train 0.10; removed in 0.11): the step factory is :class:`zoo_train.Trainer`,
which builds the train and evaluation steps of a model, a loss and a config on a mesh (``zoo
compile`` lowers ``trainer.train_step``); the abstract batch is in :mod:`zoo_train.aot`."""

from ._deprecated import StepSpec as StepSpec
from ._deprecated import build_program as build_program
from .aot import abstract_batch as abstract_batch
from .aot import batch_fields as batch_fields
from .loop import Trainer as TrainProgram  # noqa: F401 - what build_program returns now
