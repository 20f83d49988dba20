"""Escaping for what the compiler pastes into the blocks it renders.

Recalled memories, the user's profile and artifact listings hold text that came from
users, stored sessions or tools, pasted next to the compiler's own tags (``<memory>``,
``<user_profile>``). Such text must not be able to close a block early, open one, or
forge a line that reads as one of the block's own entries (memory poisoning, OWASP
ASI06). Every processor escapes with this module, so the rule lives in one place:

- a tag of any of the compiler's blocks (:data:`BLOCK_TAGS`), in any case and spacing
  (``</memory>``, ``</MEMORY>``, ``</ memory >``, ``<memory foo>``, an unclosed
  ``</memory``, fullwidth or small look-alike brackets), has its angle brackets replaced
  by ``&lt;`` / ``&gt;``; invisible format characters (zero-width, bidi controls, BOM:
  Unicode's Cf) are dropped first, so they cannot hide a tag from that rule;
- a one-line field (an id, a date, a name, a summary) has its line breaks and other
  control characters replaced by a space (:func:`inline`);
- a multi-line text keeps its lines, but every line after the first is indented
  (:func:`indented`), so no line of it can start like an entry.

Other text is left as it is: a ``<`` that opens no block tag, ``&``, quotes.
"""

from __future__ import annotations

import re

# The tag names of every block the compiler renders: a field of one block must not
# open or close any of them.
BLOCK_TAGS = ("memory", "user_profile")
# How continuation lines of a multi-line field are indented.
CONTINUATION = "  "

# Angle brackets and the look-alikes a model may read as one (fullwidth, small forms).
_LT = "<\uff1c\ufe64"
_GT = ">\uff1e\ufe65"
_TAG = re.compile(
    rf"[{_LT}]\s*/?\s*(?:" + "|".join(BLOCK_TAGS) + rf")(?![\w-])[^{_LT}{_GT}\n]*[{_GT}]?",
    re.IGNORECASE,
)
# Unicode's format characters (category Cf): invisible, so dropped before tags are matched.
_INVISIBLE = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]"
)
_BRACKETS = str.maketrans({c: "&lt;" for c in _LT} | {c: "&gt;" for c in _GT})
# Line breaks as str.splitlines sees them (\r\n, \r, \v, \f, \x1c-\x1e, \x85, \u2028,
# \u2029), and any other control character.
_CONTROL = re.compile(r"\r\n|[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
_CONTROL_BUT_TAB = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_NEEDS_WORK = re.compile(rf"[{_LT}\x00-\x1f\x7f-\x9f\u2028\u2029]|" + _INVISIBLE.pattern)


def _escape_tag(match: re.Match[str]) -> str:
    return match.group(0).translate(_BRACKETS)


def neutralise_tags(text: str) -> str:
    """``text`` with every block tag (any case, spacing, attributes or look-alike
    brackets) made inert, invisible format characters dropped."""
    text = _INVISIBLE.sub("", text)
    return _TAG.sub(_escape_tag, text) if _TAG.search(text) else text


def inline(value: object) -> str:
    """``value`` as one line of block text: tags made inert, line breaks and other
    control characters replaced by a space."""
    text = str(value)
    if _NEEDS_WORK.search(text) is None:  # the common case: nothing to escape
        return text
    return neutralise_tags(_CONTROL.sub(" ", text))


def indented(text: str) -> str:
    """``text`` as block text that may span lines: tags made inert, every line after
    the first indented by :data:`CONTINUATION` (so none reads as an entry of its own),
    control characters other than line breaks and tabs replaced by a space."""
    if _NEEDS_WORK.search(text) is None:
        return text
    lines = _LINE_BREAK.split(neutralise_tags(text))
    return ("\n" + CONTINUATION).join(_CONTROL_BUT_TAB.sub(" ", ln) for ln in lines)
