from __future__ import annotations

import pytest

from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.compiler import AgentSpec, Compiler, Services, TemplateError, render_template

STATE = {
    "name": "Dana",
    "count": 3,
    "nothing": None,
    "prefs": {"lang": "en"},
    "app:brand": "Northwind",
    "user:tier": "gold",
    "temp:now": "noon",
}


def test_plain_optional_and_scoped_keys():
    out = render_template(
        "{name} has {count} orders; brand {app:brand}, tier {user:tier}, "
        "at {temp:now}. [{missing?}] [{nothing}] {prefs}",
        STATE,
    )
    assert out == ('Dana has 3 orders; brand Northwind, tier gold, at noon. [] [] {"lang": "en"}')


def test_whitespace_inside_braces_is_ignored():
    assert render_template("{ name } / { missing? }", STATE) == "Dana / "


@pytest.mark.parametrize("ref", ["missing", "user:missing", "app:missing", "temp:missing"])
def test_missing_required_key_names_the_key(ref):
    with pytest.raises(TemplateError) as info:
        render_template(f"Hello {{{ref}}}!", STATE)
    assert info.value.key == ref
    assert ref in str(info.value)


def test_double_braces_escape():
    assert (
        render_template("Use {{name}} to insert a name, {name}.", STATE)
        == "Use {name} to insert a name, Dana."
    )
    assert render_template('Reply as {{"ok": true}}', STATE) == 'Reply as {"ok": true}'


def test_json_and_non_identifiers_are_left_verbatim():
    template = (
        'Return JSON like {"answer": "...", "sources": [1, 2]} or '
        '{"a": {"b": {}}}; keep {not a key}, {1abc}, {bad:scope}, ${name} and \\{name}.'
    )
    assert render_template(template, STATE) == template


def test_text_without_braces_is_returned_as_is():
    assert render_template("no braces here", {}) == "no braces here"


def test_artifact_reference_inlines_latest_text():
    store = InMemoryArtifactStore()
    store.save("app", "u1", "s1", "style.md", "v0")
    store.save("app", "u1", "s1", "style.md", "Write short answers.")
    store.save("app", "u1", "s1", "user:bio.txt", "Dana likes trains.")
    read = lambda n: store.load("app", "u1", "s1", n).text()  # noqa: E731
    assert (
        render_template("Style: {artifact.style.md} Bio: {artifact.user:bio.txt}", {}, read)
        == "Style: Write short answers. Bio: Dana likes trains."
    )
    assert render_template("[{artifact.nope.txt?}]", {}, read) == "[]"
    with pytest.raises(TemplateError) as info:
        render_template("{artifact.nope.txt}", {}, read)
    assert info.value.key == "artifact.nope.txt"


def test_binary_artifact_is_a_clear_template_error():
    store = InMemoryArtifactStore()
    store.save("app", "u1", "s1", "logo.png", b"\x89PNG\xff\xfe", mime_type="image/png")
    read = lambda n: store.load("app", "u1", "s1", n).text()  # noqa: E731
    with pytest.raises(TemplateError, match="binary"):
        render_template("{artifact.logo.png}", {}, read)


def test_artifact_without_store():
    assert render_template("[{artifact.x.txt?}]", {}) == "[]"
    with pytest.raises(TemplateError, match="no artifact store"):
        render_template("{artifact.x.txt}", {})


def test_instruction_processor_uses_merged_state_and_artifacts(make_session):
    store = InMemoryArtifactStore()
    store.save("app", "u1", "s1", "faq.txt", "Returns within 30 days.")
    session = make_session(state={"user:name": "Dana"})
    agent = AgentSpec(name="a", instruction="Hi {user:name} ({temp:mood}). FAQ: {artifact.faq.txt}")
    req = Compiler.default().compile(
        session, agent, services=Services(artifacts=store), temp_state={"temp:mood": "curious"}
    )
    assert "Hi Dana (curious). FAQ: Returns within 30 days." in req.system_instruction
    assert "temp:mood" not in session.state


def test_missing_key_fails_the_compile(make_session):
    with pytest.raises(TemplateError, match="user:name"):
        Compiler.default().compile(make_session(), AgentSpec(name="a", instruction="{user:name}"))
