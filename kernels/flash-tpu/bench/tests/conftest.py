"""The flash-kernel benchmarks are modules of ``kernels/flash-tpu/bench`` (run by ``make bench``
with that directory on the path); their tests import them the same way."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
