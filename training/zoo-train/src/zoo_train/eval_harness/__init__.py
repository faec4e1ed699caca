"""Benchmarks with lm-evaluation-harness on zoo models: lm-eval's ``TemplateLM`` (``ZooLM``)
scoring and generating on a device mesh, the model of a run, a Hugging Face directory or a
PEFT adapter (``load_eval_model``), and the tasks run with their scores as metric names
(``run_tasks``, ``task_metrics``), and the loop hook that runs them while a model trains
(``HarnessHook``).

lm-eval is the optional extra ``zoo-train[eval]``: importing this package without it raises a
``UsageError`` naming the install command.
"""

from ._requirement import INSTALL as INSTALL
from ._requirement import require_lm_eval as require_lm_eval

require_lm_eval()

from ._generation import Generator as Generator  # noqa: E402
from ._generation import Sampling as Sampling  # noqa: E402
from ._lm import ZooLM as ZooLM  # noqa: E402
from ._loading import EvalModel as EvalModel  # noqa: E402
from ._loading import load_eval_model as load_eval_model  # noqa: E402
from ._request_batches import Batch as Batch  # noqa: E402 - after the check that lm-eval is there
from ._request_batches import bucket_length as bucket_length  # noqa: E402
from ._request_batches import plan_batches as plan_batches  # noqa: E402
from ._results_table import results_table as results_table  # noqa: E402
from ._scoring import Scorer as Scorer  # noqa: E402
from ._tasks import find_tasks as find_tasks  # noqa: E402
from ._tasks import run_tasks as run_tasks  # noqa: E402
from ._tasks import task_metrics as task_metrics  # noqa: E402
from ._training_benchmarks import HarnessHook as HarnessHook  # noqa: E402
