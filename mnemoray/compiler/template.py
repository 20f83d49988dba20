"""Instruction templates over scoped state and artifacts (ADK-compatible).

``{key}`` inserts ``state[key]``; ``{app:key}``, ``{user:key}`` and
``{temp:key}`` read the scoped keys; ``{artifact.NAME}`` inlines the text of
the artifact's latest version; a trailing ``?`` makes any of them optional
(empty when missing). ``{{`` ... ``}}`` escapes one level of braces, so
``{{key}}`` renders as the literal ``{key}``. A brace group whose inside is
not a reference (JSON, code, prose) is left verbatim, as are ``${x}`` and
``\\{x}``, exactly like ADK.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from mnemoray.errors import InvalidInput
from mnemoray.sessions.state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX

# A run of opening braces, a brace-free middle, a run of closing braces. The
# look-behind makes a match start at the first brace of a run and skips
# shell/JS-style ``${...}`` and backslash-escaped braces.
_GROUP = re.compile(r"(?<![${\\])\{+[^{}]*\}+")
_SCOPES = (APP_PREFIX, USER_PREFIX, TEMP_PREFIX)
ARTIFACT_PREFIX = "artifact."

# name -> text of the artifact's latest version; raises KeyError if missing.
ArtifactReader = Callable[[str], str]


class TemplateError(InvalidInput):
    """A required reference of the instruction template could not be resolved;
    ``key`` names the reference (the field is ``instruction``)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{{{key}}}: {reason}", field="instruction")
        self.key = key


def is_state_name(name: str) -> bool:
    """``identifier`` or ``app:|user:|temp:`` + ``identifier``."""
    scope, sep, rest = name.partition(":")
    if not sep:
        return name.isidentifier()
    return scope + ":" in _SCOPES and rest.isidentifier()


def render_template(
    template: str, state: Mapping[str, Any], read_artifact: ArtifactReader | None = None
) -> str:
    """Render ``template``; raises :class:`TemplateError` naming a missing key."""
    if "{" not in template and "}}" not in template:
        return template

    def substitute(match: re.Match[str]) -> str:
        group = match.group()
        opens = len(group) - len(group.lstrip("{"))
        closes = len(group) - len(group.rstrip("}"))
        if opens >= 2 and closes >= 2:
            return group[1:-1]
        if opens != 1 or closes != 1:
            return group
        ref = group[1:-1].strip()
        optional = ref.endswith("?")
        name = ref[:-1] if optional else ref
        if name.startswith(ARTIFACT_PREFIX) and len(name) > len(ARTIFACT_PREFIX):
            return _artifact_text(name, optional, read_artifact)
        if not is_state_name(name):
            return group
        if name not in state:
            if optional:
                return ""
            raise TemplateError(name, "state key is missing (use {" + name + "?} if optional)")
        return _as_text(state[name])

    return _GROUP.sub(substitute, template)


def _artifact_text(ref: str, optional: bool, read_artifact: ArtifactReader | None) -> str:
    artifact_name = ref[len(ARTIFACT_PREFIX) :]
    if read_artifact is None:
        if optional:
            return ""
        raise TemplateError(ref, "no artifact store is configured")
    try:
        return read_artifact(artifact_name)
    except KeyError:
        if optional:
            return ""
        raise TemplateError(ref, f"artifact {artifact_name!r} not found") from None
    except ValueError as exc:  # binary content has no text to inline
        raise TemplateError(ref, str(exc)) from exc


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)
