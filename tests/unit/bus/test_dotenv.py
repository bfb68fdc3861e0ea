"""The env_file dotenv reader (crosstalk.bus.protocol.models): KEY=value, # comments, blank lines, literal values,
errors naming file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.bus.errors import ModelError
from crosstalk.bus.protocol.models import ModelSpec, parse_dotenv, spawn_env

KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
# Any value a line can hold: no newline (it ends the line) and no NUL (execve cannot carry it).
VALUES = st.text(st.characters(blacklist_characters="\n\r\x00", blacklist_categories=("Cs",)), max_size=40)


def test_basic_rules() -> None:
    text = "# a comment\n\nA=1\n   # indented comment\nB=x=y\nC=\nD=has # hash\nE='quoted'\nF=${NOT_EXPANDED}\n"
    assert parse_dotenv(text) == {
        "A": "1",
        "B": "x=y",
        "C": "",
        "D": "has # hash",
        "E": "'quoted'",
        "F": "${NOT_EXPANDED}",
    }


def test_value_is_literal_including_spaces_and_crlf() -> None:
    assert parse_dotenv("K= spaced value \r\nL=2\r\n") == {"K": " spaced value ", "L": "2"}


def test_later_duplicate_wins() -> None:
    assert parse_dotenv("K=1\nK=2\n") == {"K": "2"}


@pytest.mark.parametrize(
    ("text", "line"),
    [("A=1\nnot a pair\n", 2), ("=value\n", 1), ("\n\nBAD KEY=1\n", 3), ("1X=2\n", 1), ("A=b\x00c\n", 1)],
)
def test_malformed_line_names_where_and_line(text: str, line: int) -> None:
    with pytest.raises(ModelError) as info:
        parse_dotenv(text, where="auth/x.env")
    assert f"auth/x.env line {line}:" in info.value.message
    assert "\n" not in info.value.message


def test_env_file_is_read_inside_the_transport_and_errors_name_it(tmp: Path) -> None:
    def read(rel: str) -> dict[str, str]:
        return spawn_env(ModelSpec("p", "m", ("m",), env_file=Path(rel)), {}, tmp)

    (tmp / "auth").mkdir()
    path = tmp / "auth" / "a.env"
    path.write_text("\ufeffTOKEN=abc#def\n", encoding="utf-8")
    assert read("auth/a.env") == {"TOKEN": "abc#def"}
    with pytest.raises(ModelError, match=r"env_file auth/missing\.env of provider p is missing"):
        read("auth/missing.env")
    path.write_bytes(b"A=1\nB=\xff\n")
    with pytest.raises(ModelError, match=r"auth/a\.env line 2: not valid UTF-8"):
        read("auth/a.env")
    (tmp / "auth" / "link.env").symlink_to(path)
    with pytest.raises(ModelError, match=r"env_file of provider p"):
        read("auth/link.env")


@given(st.dictionaries(KEYS, VALUES, max_size=8), st.lists(st.sampled_from(["", "# c", "  ", "#K=v"]), max_size=4))
def test_roundtrip_any_values(pairs: dict[str, str], noise: list[str]) -> None:
    lines = [*noise, *(f"{k}={v}" for k, v in pairs.items()), *noise]
    assert parse_dotenv("\n".join(lines)) == pairs


@given(st.text(max_size=200))
def test_arbitrary_text_only_raises_model_error(text: str) -> None:
    try:
        result = parse_dotenv(text, where="f.env")
    except ModelError as exc:
        assert exc.message.startswith("f.env line ")
    else:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in result.items())
