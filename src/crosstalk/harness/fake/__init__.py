"""The fake harness: scriptable injection outcomes for tests, the demo and benchmarks."""

from crosstalk.harness.fake.adapter import STEPS, FakeHarness, parse_script

__all__ = ["STEPS", "FakeHarness", "parse_script"]
