"""What a client (or tiermem) put in the conversation rather than the person who types.

A client's transcript reader (:mod:`tiermem.agents.claude_code`, ``codex``, ``gemini``) leaves
such text out of the journal. Kept apart from the transcript reader (:mod:`tiermem.agents.transcript`),
which only a save needs: every hook loads the clients.
"""

from __future__ import annotations

import re

#: How tiermem's own injected memory starts (:mod:`tiermem.agents.inject`): a client that stores it
#: in the conversation must not have it journaled back as what the user said.
INJECTED_PREFIX = "Memory from tiermem"
_CONTEXT_BLOCK_RE = re.compile(r"\s*<([a-z][a-z0-9]*_[a-z0-9_]+)(?:\s[^>]*)?>.*</\1>\s*", re.DOTALL)


def is_context_text(text: str, prefixes: tuple[str, ...] = ()) -> bool:
    """True for text a client (or tiermem) put in the conversation rather than the person: it
    starts with one of ``prefixes`` or with tiermem's injected memory, or it is one whole
    ``<snake_case_tag>...</snake_case_tag>`` block (``<environment_context>``, ``<session_context>``,
    ``<turn_aborted>``...; a tag with an underscore, which people rarely type)."""
    stripped = text.lstrip()
    if stripped.startswith((INJECTED_PREFIX, *prefixes)):
        return True
    return _CONTEXT_BLOCK_RE.fullmatch(text) is not None
