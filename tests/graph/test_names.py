"""Names in a sentence (mnemoray.graph.names): dates, time words and tool lines are none."""

from __future__ import annotations

import pytest

from mnemoray.graph.names import find_names


@pytest.mark.parametrize(
    ("sentence", "names"),
    [
        ("Monday's meeting went well.", []),
        ("See you Monday!", []),
        ("Sept. 3 was fun.", []),
        ("Mid-May we went to Rome.", ["Rome"]),
        ("Last May in Porto was fun.", ["Porto"]),
        ("Early June, Lena visited.", ["Lena"]),
        ("We met in May and June.", []),
        ("Called the dentist about my tooth.", []),
        ("Tool call: Search(query='Berlin')", []),
        ("On Saturday I met Anna at Acme Labs.", ["Anna", "Acme Labs"]),
    ],
)
def test_what_is_a_name(sentence: str, names: list[str]) -> None:
    assert [n.text for n in find_names(sentence)] == names
