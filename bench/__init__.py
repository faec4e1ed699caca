"""zoo benchmarks: training throughput, attention, compile time and checkpoint I/O.

Run ``python -m bench.run`` (full) or ``python -m bench.run --quick``; see ``bench/README.md``.
"""
