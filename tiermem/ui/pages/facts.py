"""The Facts page: list or search a scope's facts, see what made each hit, edit, delete, purge.

With a query the facts come from :meth:`Memory.search` (``tier="fact"``), each with its score and
what made it (``SearchHit.extra``: ``keyword`` coverage, ``vector`` cosine and, with a recency
half-life, the ``recency`` factor that reordered it). Without one, :meth:`FactStore.page`: highest
confidence first, newest first among equal ones, :data:`PAGE_SIZE` facts a page (``page``, from 1).
Every change goes through the library: ``facts.update`` / ``facts.delete`` (validation,
redaction, audit) and ``Memory.purge`` (erased for good).
"""

from __future__ import annotations

from collections.abc import Mapping

from tiermem import validate
from tiermem.clock import utc_iso
from tiermem.errors import InvalidInput
from tiermem.types import CATEGORIES, Fact, SearchHit
from tiermem.ui.html import View, esc, form, hidden, table

DEFAULT_K = 50
PAGE_SIZE = 100
_WHY = (("keyword", "keyword"), ("vector", "vector"), ("recency", "recency"))


def _float(text: str, name: str) -> float:
    return validate.decimal_number(text, name, 0.0, 1.0)


def _filters(view: View) -> str:
    q, category = view.param("q"), view.param("category")
    options = "".join(f'<option value="{esc(c)}"{" selected" if c == category else ""}>{esc(c)}</option>'
                      for c in ("", *CATEGORIES))
    return (f'<form method=get action=/facts class=filters>{hidden("user", view.user)}{hidden("agent", view.agent)}'
            f'<label>search <input type=search name=q value="{esc(q)}" size=40></label> '
            f"<label>category <select name=category>{options}</select></label> "
            f'<label>since <input type=date name=since value="{esc(view.param("since"))}"></label> '
            f'<label>min score <input name=min value="{esc(view.param("min"))}" size=5 placeholder=default></label> '
            "<button type=submit>Search</button></form>")


def render(view: View) -> str:
    mem, q = view.mem, view.param("q").strip()
    category = view.param("category") or None
    if q:
        floor = _float(view.param("min"), "min score") if view.param("min") else None
        hits = mem.search(q, k=DEFAULT_K, category=category, tier="fact", since=view.param("since") or None,
                          min_score=floor)
        facts = {f.id: f for f in mem.facts.list(category)}
        rows = [_row(view, facts[h.ref], h) for h in hits if h.ref in facts]
        shown_floor = mem.search_floor() if floor is None else floor
        summary = (f"<p class=muted>{len(rows)} hits for {esc(q)} (floor {shown_floor:.3f}; "
                   "score = evidence: keyword coverage and cosine, blended)</p>")
    else:
        rows, summary = _listed(view, category)
    headers = ["fact", "category", "confidence", "created / updated", *(["score", "what made it"] if q else []),
               "change"]
    body = table(headers, rows, "facts") if rows else "<p class=muted>Nothing found.</p>"
    return _filters(view) + summary + body


def _listed(view: View, category: str | None) -> tuple[list[list[str]], str]:
    """One page of the scope's facts (a page past the last shows the last) and the line above it."""
    total = view.mem.facts.count(category)
    pages = max(1, -(-total // PAGE_SIZE))
    number = min(validate.whole_number(view.param("page", "1"), "page", 1), pages)
    listed = view.mem.facts.page(category, limit=PAGE_SIZE, offset=(number - 1) * PAGE_SIZE)
    rows = [_row(view, fact, None) for fact in listed]
    where = f"{total} facts in {esc(view.user)}/{esc(view.agent)}"
    if pages == 1:
        return rows, f"<p class=muted>{where}</p>"
    first = (number - 1) * PAGE_SIZE + 1
    links = [f'<a href="{view.url("/facts", category=category, page=n)}">{label}</a>'
             for n, label in ((1, "first"), (number - 1, "previous"), (number + 1, "next"), (pages, "last"))
             if 1 <= n <= pages and n != number]
    return rows, (f"<p class=muted>{where}; {first}-{first + len(rows) - 1} shown (page {number} of {pages})</p>"
                  f"<p class=pages>{' · '.join(links)}</p>")


def _row(view: View, fact: Fact, hit: SearchHit | None) -> list[str]:
    cells = [f'<span class=content id="f-{esc(fact.id)}">{esc(fact.content)}</span>'
             f'<br><small class=muted>{esc(fact.id)}{" - " + esc(fact.source) if fact.source else ""}</small>',
             esc(fact.category), f"{fact.confidence:.2f}",
             f"{esc(utc_iso(fact.created_at)[:16])}<br>{esc(utc_iso(fact.updated_at)[:16])}"]
    if hit is not None:
        why = "".join(f"<span>{label} {float(hit.extra[key]):.3f}</span>" for key, label in _WHY if key in hit.extra)
        cells += [f"<strong>{hit.score:.3f}</strong>", f"<span class=why>{why}</span>"]
    cells.append(_controls(view, fact))
    return cells


def _controls(view: View, fact: Fact) -> str:
    options = "".join(f'<option{" selected" if c == fact.category else ""}>{esc(c)}</option>' for c in CATEGORIES)
    keep = (hidden("id", fact.id) + hidden("q", view.param("q")) + hidden("category_filter", view.param("category"))
            + hidden("page", view.param("page")))
    edit = form(view, "/facts/edit", keep + f'<textarea name=content aria-label=content>{esc(fact.content)}</textarea>'
                f"<select name=category aria-label=category>{options}</select>"
                f'<input name=confidence value="{fact.confidence:.2f}" size=4 aria-label=confidence>', "Save",
                css="edit")
    delete = form(view, "/facts/delete", keep, "Delete", css="delete")
    purge = form(view, "/facts/purge", keep, "Purge", css="purge", confirm="erase for good")
    return edit + delete + purge


def _fact_id(data: Mapping[str, str]) -> str:
    fact_id = data.get("id", "")
    if not fact_id:
        raise InvalidInput("no fact id")
    return fact_id


def edit(view: View, data: Mapping[str, str]) -> str:
    """POST /facts/edit: the fields that differ go to :meth:`FactStore.update`."""
    old = view.mem.facts.get(_fact_id(data))
    content = data.get("content")
    content = content.replace("\r\n", "\n") if content is not None else None
    category = data.get("category") or None
    confidence = _float(data["confidence"], "confidence") if data.get("confidence") else None
    new = view.mem.facts.update(old.id, content if content != old.content else None,
                                category if category != old.category else None,
                                confidence if confidence is not None and round(old.confidence, 2) != confidence
                                else None)
    return f"saved fact {new.id}" if new != old else f"fact {old.id} unchanged"


def delete(view: View, data: Mapping[str, str]) -> str:
    """POST /facts/delete: :meth:`FactStore.delete` (tombstoned, audited)."""
    fact_id = _fact_id(data)
    view.mem.facts.delete(fact_id, reason="deleted in tiermem ui")
    return f"deleted fact {fact_id}"


def purge(view: View, data: Mapping[str, str]) -> str:
    """POST /facts/purge (with the confirm box ticked): :meth:`Memory.purge` of one fact."""
    if data.get("confirm") != "yes":
        raise InvalidInput("tick 'erase for good' to purge")
    report = view.mem.purge(_fact_id(data))
    return (f"purged fact {', '.join(report.facts)} ({sum(report.rows.values())} rows, "
            f"{report.occurrences} file occurrences)")
