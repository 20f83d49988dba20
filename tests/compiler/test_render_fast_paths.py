"""The rendering's fast path against what it stands for: ``one_part_content`` builds
what the constructors build. The compiled requests themselves are pinned in
tests/compiler/test_compile_pinned.py and tests/compiler/test_compile_bench_pinned.py."""

from __future__ import annotations

import dataclasses

import pytest

from mnemoray.compiler.request import (
    Content,
    FunctionCall,
    FunctionResponse,
    Part,
    one_part_content,
)


@pytest.mark.parametrize(
    ("role", "text", "call", "response"),
    [
        ("user", "hello", None, None),
        ("model", "", None, None),
        ("model", None, FunctionCall("lookup", {"id": "1"}, "c1"), None),
        ("user", None, None, FunctionResponse("lookup", {"ok": True}, "c1")),
    ],
)
def test_one_part_content_is_the_constructed_content(role, text, call, response):
    built = one_part_content(role, text, ("e1",), 7, call, response)
    expected = Content(role, (Part(text, call, response),), ("e1",), 7)
    assert built == expected
    if text is not None:  # (a call's or response's payload is a dict: unhashable)
        assert hash(built) == hash(expected)
    assert repr(built) == repr(expected)
    assert built.to_dict() == expected.to_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.tokens = 8  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.parts[0].text = "changed"  # type: ignore[misc]
