"""The Calls page: the LLM call log (``Memory.calls``, :mod:`tiermem.calls`), newest first.

Filters are those of ``CallLog.list`` (purpose, model, outcome, since, limit); the totals are
``CallLog.totals(since)``. A store whose library has no call log says so instead of failing.
Prompt and completion texts exist only with ``log_prompts = true`` (redacted); they are shown
folded, escaped like every stored text.
"""

from __future__ import annotations

from typing import Any

from tiermem import validate
from tiermem.ui.html import View, esc, hidden, table

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
NO_CALL_LOG = "No call log: this tiermem has no Memory.calls (the LLM call log of issue 17)."


def _limit(view: View) -> int:
    return validate.whole_number(view.param("limit", str(DEFAULT_LIMIT)), "limit", 1, MAX_LIMIT)


def _choice(view: View, name: str, values: tuple[str, ...]) -> str:
    """A select of ``values`` ("" = any)."""
    chosen = view.param(name)
    options = "".join(f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v or "any")}</option>'
                      for v in ("", *values))
    return f"<label>{name} <select name={name}>{options}</select></label> "


def _filters(view: View) -> str:
    from tiermem.calls import CALL_OUTCOMES, CALL_PURPOSES

    fields = (_choice(view, "purpose", CALL_PURPOSES)
              + f'<label>model <input name=model value="{esc(view.param("model"))}" size=18></label> '
              + _choice(view, "outcome", CALL_OUTCOMES)
              + f'<label>since <input name=since value="{esc(view.param("since"))}" size=18 '
              'placeholder="2026-03-01, 24h, 7d"></label> ')
    return (f"<form method=get action=/calls class=filters>{hidden('user', view.user)}{hidden('agent', view.agent)}"
            f'{fields}<label>limit <input name=limit value="{esc(view.param("limit", str(DEFAULT_LIMIT)))}" size=5>'
            "</label> <button type=submit>Filter</button></form>")


def _money(value: Any) -> str:
    return "" if value is None else f"${float(value):.4f}"


def _totals(totals: Any) -> str:
    purposes = ", ".join(f"{esc(k)} {v}" for k, v in sorted(totals.by_purpose.items())) or "none"
    outcomes = ", ".join(f"{esc(k)} {v}" for k, v in sorted(totals.by_outcome.items())) or "none"
    cost = _money(totals.cost) or "no prices"
    return (f"<p class=totals>{totals.calls} calls, {totals.prompt_tokens} prompt + {totals.completion_tokens} "
            f"completion tokens, cost {esc(cost)}. By purpose: {purposes}. By outcome: {outcomes}.</p>")


def _row(call: Any) -> list[str]:
    texts = "".join(f"<details><summary>{label}</summary><pre>{esc(text)}</pre></details>"
                    for label, text in (("prompt", call.prompt), ("completion", call.completion)) if text)
    tokens = f"{call.prompt_tokens} / {call.completion_tokens}" + (" (counted)" if call.tokens_counted else "")
    return [str(call.id), esc(str(call.at)[:19]), esc(call.purpose), esc(f"{call.provider}:{call.model}"),
            esc(tokens), f"{float(call.latency_ms):.0f} ms", esc(call.outcome), str(call.attempt),
            esc(_money(call.cost)), esc(call.error or "") + texts]


def render(view: View) -> str:
    log: Any = getattr(view.mem, "calls", None)
    if log is None:
        return f"<p class='flash err'>{esc(NO_CALL_LOG)}</p>"
    since = view.param("since") or None
    calls = log.list(purpose=view.param("purpose") or None, model=view.param("model") or None,
                     outcome=view.param("outcome") or None, since=since, limit=_limit(view))
    headers = ["id", "at (UTC)", "purpose", "model", "tokens in / out", "latency", "outcome", "attempt", "cost",
               "error"]
    rows = [_row(call) for call in calls]
    listing = table(headers, rows, "calls") if rows else "<p class=muted>No calls logged (with these filters).</p>"
    return _filters(view) + _totals(log.totals(since=since)) + listing
