"""Run ``zoo kernels verify NAME`` on the first few conformance cases, in an environment of wheels.

Usage: python verify_few.py NAME COUNT

The whole case table takes minutes on a CPU; the command, the import path and the report are
the same for a prefix of it. Exits with the CLI's own status.
"""

from __future__ import annotations

import sys

import zoo_attention.testing
from zoo_train.cli import main

if __name__ == "__main__":
    name, count = sys.argv[1], int(sys.argv[2])
    zoo_attention.testing.CASES = zoo_attention.testing.CASES[:count]
    sys.exit(main(["kernels", "verify", name]))
