"""Deprecated (zoo-train 0.10; removed in 0.11): ahead-of-time compilation moved to
:mod:`zoo_train.aot`, under the same names."""

import warnings

from .aot import *  # noqa: F403 - the same names, for one minor release

warnings.warn(
    "zoo_train.compile is deprecated and will be removed in zoo-train 0.11; import "
    "zoo_train.aot instead.",
    DeprecationWarning,
    stacklevel=2,
)
