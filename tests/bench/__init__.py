"""The benchmark suite of issue 13, run by ``scripts/bench``. Benchmarks, not tests: only test_quick.py is
collected by pytest, and it checks that the quick run completes, never a figure.

It lives under tests/ because it drives the same things the tests drive, with the same helpers: the
real engine through tests/_engine.py (environment, projects), the emulator as a process, moto's S3.
Being inside ``tests`` it is linted with the rest of the code and importable as ``tests.bench`` by the
processes it starts (the engine's dynamic-provider host imports ``tests.bench.noop_provider``).
"""
