"""Benchmarks of the lab spawner on the local stack: ``python -m bench.run``.

They report numbers and never assert timings; ``bench/RESULTS.md`` explains each figure.
"""
