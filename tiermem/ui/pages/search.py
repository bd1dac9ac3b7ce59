"""The Search page: what :meth:`Memory.search` answers, as ``tiermem search`` shows it.

Facts, ``MEMORY.md`` and the journal (or one tier), above the floor in force, best first: each
hit with its rank, score, tier, source and text. A journal record that ranks above higher scores
because the conversation around it matches too (``SearchHit.lifted_by_thread``, docs/search.md
"Order") carries :data:`~tiermem.search.thread.LIFTED_MARK`, and one line under the list says why.
"""

from __future__ import annotations

from tiermem.search.thread import LIFTED_LEGEND, LIFTED_MARK
from tiermem.types import SearchHit
from tiermem.ui.html import View, esc, hidden, table

DEFAULT_K = 20
TIERS = ("fact", "core", "daily")


def _box(view: View, q: str, tier: str) -> str:
    options = "".join(f'<option value="{esc(t)}"{" selected" if t == tier else ""}>{esc(t or "all")}</option>'
                      for t in ("", *TIERS))
    return (f'<form method=get action=/search class=filters>{hidden("user", view.user)}{hidden("agent", view.agent)}'
            f'<label>search <input type=search name=q value="{esc(q)}" size=50></label> '
            f"<label>tier <select name=tier>{options}</select></label> <button type=submit>Search</button></form>")


def _score(hit: SearchHit) -> str:
    mark = f' <span class=lifted title="{esc(LIFTED_LEGEND)}">{esc(LIFTED_MARK)}</span>' if hit.lifted_by_thread else ""
    return f"<strong>{hit.score:.3f}</strong>{mark}"


def render(view: View) -> str:
    mem, q, tier = view.mem, view.param("q").strip(), view.param("tier")
    box = _box(view, q, tier)
    if not q:
        return box + "<p class=muted>Search the facts, MEMORY.md and the journal of this scope.</p>"
    hits = mem.search(q, k=DEFAULT_K, tier=tier or None)
    summary = (f"<p class=muted>{len(hits)} {'hit' if len(hits) == 1 else 'hits'} for {esc(q)} "
               f"(floor {mem.search_floor():.3f}; score = evidence: keyword coverage and cosine, blended)</p>")
    if not hits:
        return box + summary + "<p class=muted>Nothing scored above the floor.</p>"
    rows = [[str(rank), _score(hit), esc(hit.tier + (" (pending)" if hit.provisional else "")), esc(hit.ref),
             esc(hit.text)] for rank, hit in enumerate(hits, 1)]
    legend = f"<p class=muted>{esc(LIFTED_LEGEND)}</p>" if any(hit.lifted_by_thread for hit in hits) else ""
    return box + summary + table(["rank", "score", "tier", "source", "text"], rows, "hits") + legend
