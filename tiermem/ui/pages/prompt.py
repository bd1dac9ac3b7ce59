"""The Prompt page: the text an agent gets, exactly, with token counts per section.

Two texts, as the library hands them out: :meth:`Memory.format_for_injection` (with the query of
the box, which ranks facts and Core bullets and adds relevant notes) and
:meth:`Memory.system_context` (the sources in system-prompt order). Tokens are counted with the
library's own counter (:func:`tiermem.tokens.count_tokens`), the one the budgets use.
"""

from __future__ import annotations

from tiermem import validate
from tiermem.tokens import count_tokens
from tiermem.ui.html import View, esc, hidden, pre, table

#: The section titles of the injection text (:mod:`tiermem.facts.injection`).
INJECTION_TITLES = ("User Context:", "History:", "Core Memory:", "Facts:", "Relevant notes:")


def injection_sections(text: str) -> list[tuple[str, str]]:
    """``(title, text)`` of each section of an injection text, in order ("" title: untitled)."""
    sections: list[tuple[str, str]] = []
    for block in text.split("\n\n"):
        first = block.split("\n", 1)[0]
        title = first[:-1] if first in INJECTION_TITLES else ""
        if sections and not title:  # a blank line inside a section: still that section
            sections[-1] = (sections[-1][0], sections[-1][1] + "\n\n" + block)
        else:
            sections.append((title, block))
    return sections


def _counts(sections: list[tuple[str, str]], total: str) -> str:
    rows = [[esc(name or "(text)"), str(count_tokens(body))] for name, body in sections]
    rows.append(["<strong>total</strong>", f"<strong>{count_tokens(total)}</strong>"])
    return table(["section", "tokens"], rows, "tokens")


def render(view: View) -> str:
    mem, q = view.mem, view.param("q").strip()
    budget = validate.whole_number(view.param("max_tokens"), "max_tokens") if view.param("max_tokens") else None
    box = (f'<form method=get action=/prompt>{hidden("user", view.user)}{hidden("agent", view.agent)}'
           f'<label>query <input type=search name=q value="{esc(q)}" size=50></label> '
           f'<label>max tokens <input name=max_tokens value="{esc(view.param("max_tokens"))}" size=6 '
           f'placeholder="{mem.settings.max_injection_tokens}"></label> <button type=submit>Show</button></form>')
    injection = mem.format_for_injection(max_tokens=budget, query=q or None)
    context = mem.system_context()
    return "".join([
        box,
        f"<h2>Injection text <span class=muted>format_for_injection({'query' if q else ''})</span></h2>",
        _counts(injection_sections(injection), injection) if injection else "",
        pre(injection, "injection") if injection else "<p class=muted>Nothing to inject yet.</p>",
        "<h2>System context <span class=muted>system_context().text</span></h2>",
        _counts([(name, text) for name, text in context.sections.items() if text], context.text),
        pre(context.text, "context") if context.text else "<p class=muted>The system context is empty.</p>",
    ])
