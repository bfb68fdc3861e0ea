"""data/crosstalk.yaml written by anyone who can push: generated documents are either a registry or one
ModelError naming the problem, never another exception, never an alias expansion."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.bus.errors import ModelError
from crosstalk.bus.protocol.models import Registry, parse_registry

SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=20) | st.sampled_from(
    ["2026-13-45", "2026-01-01", "*a", "&a x", "~", "!!python/object:os.system", "${X}"])  # fmt: skip
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=10) | st.sampled_from(["providers", "models", "binary", "argv", "env", "env_file"]),
    inner, max_size=4), max_leaves=20)  # fmt: skip
DOCUMENTS = st.one_of(
    VALUES.map(lambda v: yaml.safe_dump({"providers": v}, allow_unicode=True)),
    VALUES.map(lambda v: yaml.safe_dump(v, allow_unicode=True)),
    st.text(max_size=400),
    st.just("a: &x [1, 2]\nb: [*x, *x, *x]\n"),
)


@settings(max_examples=400, deadline=None)
@given(DOCUMENTS)
def test_any_registry_document_is_a_registry_or_one_model_error(text: str) -> None:
    try:
        assert isinstance(parse_registry(text), Registry)
    except ModelError as exc:
        assert str(exc)
