"""GRPO fine-tuning: groups of completions sampled from the policy being trained, scored by
reward functions, and the policy pushed toward the completions that beat their group.

The settings (``_config``), advantages from rewards (``_advantages``), the loss under the loss
contract (``_loss``), reward functions loaded and checked (``_rewards``) and the built-ins
(``_builtin_rewards``).
"""

from typing import Any

from ..settings import LOSS_TYPES as LOSS_TYPES
from ..settings import SCALINGS as SCALINGS
from ..settings import GRPOConfig as GRPOConfig
from ._advantages import combined_rewards as combined_rewards
from ._advantages import group_advantages as group_advantages
from ._builtin_rewards import BUILTIN_REWARDS as BUILTIN_REWARDS
from ._builtin_rewards import completion_text as completion_text
from ._builtin_rewards import make_answer_match as make_answer_match
from ._builtin_rewards import make_format_match as make_format_match
from ._builtin_rewards import make_length_penalty as make_length_penalty
from ._loss import METRICS as METRICS
from ._loss import GRPOLoss as GRPOLoss
from ._loss import completion_logps as completion_logps
from ._loss import policy_objective as policy_objective
from ._parts import COMPLETIONS_FILE as COMPLETIONS_FILE
from ._parts import CompletionLog as CompletionLog
from ._parts import grpo_parts as grpo_parts
from ._prompts import LONG_PROMPTS as LONG_PROMPTS
from ._prompts import Prompt as Prompt
from ._prompts import PromptSource as PromptSource
from ._prompts import read_prompts as read_prompts
from ._rewards import DEFAULT_REWARD_TIMEOUT as DEFAULT_REWARD_TIMEOUT
from ._rewards import RESERVED_ARGUMENTS as RESERVED_ARGUMENTS
from ._rewards import REWARD_BOUND as REWARD_BOUND
from ._rewards import RewardError as RewardError
from ._rewards import Rewards as Rewards
from ._rewards import load_reward as load_reward
from ._rollout import Rollout as Rollout
from ._rollout import Samples as Samples
from ._rollout import completion_masks as completion_masks
from ._rollout import rollout_key as rollout_key
from ._rollout import rollout_rows as rollout_rows


def __getattr__(name: str) -> Any:
    if name == "train_grpo":  # kept for one minor release (zoo-train 0.10), warning when called
        from .._deprecated import train_grpo

        return train_grpo
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
