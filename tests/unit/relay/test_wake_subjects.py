"""The bus wake's subjects: every clone of a transport shares its key and no other transport has it; the waking
machine comes from the subject the server delivered, and anything else is not a wake of this transport."""

from __future__ import annotations

import pytest

from crosstalk.relay.wake import alias_of, transport_key, wake_filter, wake_subject

ROOT = "3f786850e387550fdab836ed7e6dc881de23001b"
OTHER = "89e6c98d92887913cadf06b2adb97f26cde4849b"


def test_the_key_is_the_root_commits_and_one_subject_token() -> None:
    key = transport_key(f"{ROOT}\n")
    assert key == transport_key(f"  {ROOT} ") and len(key) == 16 and key.isalnum()
    assert transport_key(OTHER) != key
    assert transport_key(f"{OTHER}\n{ROOT}\n") == transport_key(f"{ROOT}\n{OTHER}\n")  # several roots: any order
    with pytest.raises(ValueError):
        transport_key("\n")


def test_a_wake_names_its_transport_and_machine() -> None:
    key = transport_key(ROOT)
    assert wake_subject(key, "laptop") == f"crosstalk.v1.wake.{key}.laptop"
    assert wake_filter(key) == f"crosstalk.v1.wake.{key}.*"
    assert alias_of(wake_subject(key, "laptop"), key) == "laptop"
    other = transport_key(OTHER)
    for subject in (
        wake_subject(other, "laptop"),  # another transport's machines: ignored
        f"crosstalk.v1.wake.{key}",
        f"crosstalk.v1.wake.{key}.a.b",
        f"crosstalk.v1.msg.{key}.laptop",
        f"crosstalk.v1.wake.{key}.bad!alias",
    ):
        assert alias_of(subject, key) is None, subject
