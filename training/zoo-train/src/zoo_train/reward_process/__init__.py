"""Reward functions run in processes of their own (:class:`RewardProcess`): a copy of each
call's arguments, a timeout, ``SystemExit`` and the like as a failed call, and no process left
behind. Nothing here imports JAX: the reward process starts light."""

from ._client import RewardProcess as RewardProcess
from ._client import RewardProcessError as RewardProcessError
