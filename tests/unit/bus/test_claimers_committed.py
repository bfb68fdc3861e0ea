"""The claims the registry's commit subjects state: the newest edit of a key decides."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.bus.runs.claimers import add_summary, committed_claims


def test_the_newest_edit_of_a_key_decides() -> None:
    newest_first = [
        add_summary("t/a", "gpu"),
        "crosstalk: model remove t/b",
        add_summary("t/b", "laptop"),  # removed since
        add_summary("t/a", "old"),  # replaced since by gpu's add
        add_summary("t/c", None),  # added where its program is not: no claim
        "crosstalk: 3 messages from x to y in review",
    ]
    assert committed_claims(newest_first) == {"t/a": ["gpu"]}


def test_a_subject_someone_else_wrote_names_no_machine_outside_an_alias() -> None:
    assert (
        committed_claims(["crosstalk: model add t/a (claimed by ../../etc)", "crosstalk: model add t/b (claimed by)"])
        == {}
    )


@given(st.lists(st.text(max_size=80), max_size=20))
def test_any_subjects_parse_to_aliases_only(subjects: list[str]) -> None:
    for key, machines in committed_claims(subjects).items():
        assert " " not in key and all(m and "/" not in m for m in machines)
