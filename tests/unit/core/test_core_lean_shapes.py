"""The id and tag checks core/ids.py does with str methods (no `re` on `crosstalk send`'s path) give the answers of
the regular expressions they replace: random strings, and strings built near each shape."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.ids import is_agent_id, is_external_tag, is_hop_entry, is_message_id
from crosstalk.core.sender import EXTERNAL_TAG_RE

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
AGENT_ID_RE = re.compile(r"^[0-9a-f]{16}\Z")
HOP_RE = re.compile(r"^[0-9a-f]{24}\Z")

# Near the shapes: hex digits, the other case, dashes, whitespace of every kind, '@' and ':', and any character.
NEAR = st.sampled_from("0a9fA-F- \t\n\x0b\x0c\x1c\x85\xa0\u2028\u3000@:._gzé")
TEXT = st.text(NEAR, max_size=40) | st.text(max_size=40)


@given(TEXT | st.builds(lambda a, b: a + "-" + b, st.text("0123456789abcdef-", max_size=20), TEXT))
def test_message_id(value: str) -> None:
    assert is_message_id(value) == bool(UUID_RE.match(value))


@given(TEXT | st.text("0123456789abcdefA\n", min_size=15, max_size=25))
def test_agent_id_and_hop_entry(value: str) -> None:
    assert is_agent_id(value) == bool(AGENT_ID_RE.match(value))
    assert is_hop_entry(value) == bool(HOP_RE.match(value))


@given(st.builds(lambda s, t: "@" + s + ":" + t, TEXT, TEXT) | TEXT)
def test_external_tag(value: str) -> None:
    assert is_external_tag(value) == bool(EXTERNAL_TAG_RE.match(value))


def test_shapes_by_example() -> None:
    uuid = "01a24037-a11e-70fe-aeb6-cc36f93d2c3b"
    assert is_message_id(uuid)
    assert not is_message_id(uuid + "\n")
    assert not is_message_id(uuid.upper())
    assert not is_message_id(uuid[:8] + "a" + uuid[9:13] + "-" + uuid[14:])  # a dash moved
    assert not is_message_id(None)
    assert is_external_tag("@ci:build") and is_external_tag("@a.b-c_d:x/y@z")
    for bad in ("", None, "@:x", "@ci:", "ci:x", "@-ci:x", "@ci:a b", "@ci:a\u00a0", "@c i:x", "@ci:x\n"):
        assert not is_external_tag(bad)
