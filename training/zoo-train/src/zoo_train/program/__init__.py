"""What a run computes, built in one place: the train and evaluation steps of a model, a loss
and a config on a mesh. ``zoo train``, ``zoo finetune`` and ``zoo compile`` build their step
here, so what ``zoo compile`` compiles is the step the run takes."""

from ._batch import abstract_batch as abstract_batch
from ._batch import batch_fields as batch_fields
from ._build import TrainProgram as TrainProgram
from ._build import build_program as build_program
from ._spec import StepSpec as StepSpec
