"""encode_name / decode_name: any text maps to a valid name, distinct texts to distinct
names, and every name that is not hashed decodes back to its text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsession import ValidationError
from agentsession.ids import NAME_PATTERN, decode_name, encode_name

#: Every code point, lone surrogates included.
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=60)


@given(ANY_TEXT)
def test_any_text_encodes_to_a_name_that_decodes_back(text: str) -> None:
    name = encode_name(text)
    assert NAME_PATTERN.fullmatch(name)
    if name.startswith("++h"):
        assert len(name) == 67
        with pytest.raises(ValidationError):
            decode_name(name)
    else:
        assert decode_name(name) == text


@given(ANY_TEXT, ANY_TEXT)
def test_distinct_texts_get_distinct_names(a: str, b: str) -> None:
    assert (encode_name(a) == encode_name(b)) == (a == b)


@given(st.from_regex(NAME_PATTERN, fullmatch=True))
def test_names_not_starting_with_plus_stay_as_they_are(name: str) -> None:
    if name.startswith("+"):
        assert encode_name(name) != name and decode_name(encode_name(name)) == name
    else:
        assert encode_name(name) == name == decode_name(name)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("alice", "alice"),
        ("bob@example.com", "bob@example.com"),
        ("John Smith", "+John+20Smith"),
        ("+49 30", "++2B49+2030"),
        ("app/ü", "+app+2F+C3+BC"),
    ],
)
def test_documented_examples(text: str, name: str) -> None:
    assert encode_name(text) == name
    assert decode_name(name) == text


@pytest.mark.parametrize("name", ["+zz", "+a+2", "+a+2b", "+a+20+", "++", "+", "+a+FF", "bad name"])
def test_names_encode_name_never_makes_are_refused(name: str) -> None:
    with pytest.raises(ValidationError):
        decode_name(name)


@pytest.mark.parametrize("text", ["", None, 5])
def test_encode_refuses_empty_and_non_strings(text: object) -> None:
    with pytest.raises(ValidationError):
        encode_name(text)  # type: ignore[arg-type]
