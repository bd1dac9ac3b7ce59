"""Shared set-up of the web viewer tests: a store with hostile text everywhere, a dream version
(with a diary and a dropped bullet), an edit version, and a dead-letter queue item."""

from __future__ import annotations

from pathlib import Path

from dream_helpers import GOOD_REPLY, NOW, PRIOR_MEMORY, open_memory, seed
from queue_helpers import extraction

from tiermem import Memory
from tiermem.storage.outbox import OutboxRepository
from tiermem.testing import FakeClock, ScriptedChatModel

SCRIPT = '<script>alert("pwned")</script>'
ESCAPED = "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;"
FABRICATED = "Owns a yacht called Poseidon moored in Monaco."
DREAM_REPLY = GOOD_REPLY.replace("- Has a cat named Pixel.\n", f"- Has a cat named Pixel.\n- {FABRICATED}\n").replace(
    "[DREAM]\n", f"[DREAM]\nDiary says {SCRIPT}.\n")
QUEUED_FACT = "Maintains the tiermem web viewer"
EDITED_MEMORY_LINE = f"- Hand-written note {SCRIPT}\n"


def seeded(root: Path, clock: FakeClock) -> tuple[Memory, ScriptedChatModel, int]:
    """The store of the viewer tests; returns the Memory, its scripted LLM and the dead item's id.

    MEMORY.md: the dream's text plus a hand-written line with ``<script>`` (version 2 keeps the
    dream's text, version 1 the text before the dream). Facts, a Daily note and the diary hold
    ``<script>`` too. The LLM still has one reply: the extraction of the dead queue item."""
    mem, llm = open_memory(root, clock, [DREAM_REPLY, extraction(QUEUED_FACT)], debounce_seconds=0)
    seed(mem, PRIOR_MEMORY)
    mem.daily.append("Session Notes", [f"user: my note {SCRIPT}"], at=NOW)
    result = mem.deep_dream(lookback_days=2)
    assert result.status == "written", result.reason
    assert [d.text for d in result.dropped] == [FABRICATED]
    mem.core.rewrite(mem.core.read() + EDITED_MEMORY_LINE, "edit")
    mem.facts.add(f"Favourite snippet is {SCRIPT}", "preference", 0.9)
    mem.facts.add("Prefers dark mode in every editor", "preference", 0.95)
    mem.facts.add("Works on distributed databases", "knowledge", 0.8)
    mem.for_scope("bob").facts.add("Bob likes sailing on the lake", "preference", 0.9)
    outbox = OutboxRepository(mem.db)
    item = outbox.put("t-dead", mem.scope, [{"role": "user", "content": f"I maintain the viewer {SCRIPT}"}],
                      clock.now())
    with mem.db.transaction() as conn:
        conn.execute("UPDATE outbox SET status = 'dead', attempts = 3, last_error = ? WHERE id = ?",
                     ("provider down", item))
    return mem, llm, item
