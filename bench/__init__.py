"""zoo benchmarks: training throughput, the loop, profiles, attention, compile time, checkpoint
I/O, the token store, meshes, memory soak and TPU fit; the flash-kernel benchmarks beside their
kernel.

Run ``python -m bench.run`` (full) or ``python -m bench.run --quick``; see ``bench/README.md``.
"""
