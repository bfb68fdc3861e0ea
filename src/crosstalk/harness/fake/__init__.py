"""The fake harness: scriptable injection outcomes for tests, the demo and benchmarks."""

from crosstalk.harness.fake.adapter import STEPS, FakeHarness, parse_script
from crosstalk.harness.fake.kind import KIND, FakeKind

__all__ = ["KIND", "STEPS", "FakeHarness", "FakeKind", "parse_script"]
