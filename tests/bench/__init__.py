"""The benchmark suite of issue 13 (scripts/bench): not tests, except test_quick.py."""
