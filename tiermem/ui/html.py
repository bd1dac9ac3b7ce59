"""HTML of the web viewer: plain strings, every stored or requested value through :func:`esc`.

Memory content is untrusted input (a fact, a daily note or ``MEMORY.md`` may hold ``<script>``),
so nothing reaches the page unescaped: the helpers here take text and escape it themselves, and
callers pass ready HTML only as the output of these helpers. The pages also go out with a
Content-Security-Policy that allows no script at all (:data:`SECURITY_HEADERS`), a second wall.
No template engine: the project has none as a dependency, and these pages are small.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlencode

if TYPE_CHECKING:
    from tiermem.memory import Memory

SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # "no-referrer" makes Chromium send "Origin: null" on our own forms
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}

#: The navigation: path, label.
PAGES: tuple[tuple[str, str], ...] = (("/core", "Core"), ("/journal", "Journal"), ("/facts", "Facts"),
                                      ("/search", "Search"), ("/prompt", "Prompt"), ("/queue", "Queue"),
                                      ("/calls", "Calls"))


def esc(value: object) -> str:
    """``value`` as text safe in an element or a quoted attribute."""
    return html.escape(str(value), quote=True)


@dataclass
class View:
    """One request as the pages see it: the scope's Memory, the query parameters, the CSRF token."""

    mem: Memory
    path: str
    params: Mapping[str, str]
    csrf: str
    scopes: Sequence[tuple[str, str]] = field(default_factory=list)
    #: the Memory the server opened (the queue runs there: its items may name any scope)
    root_memory: Memory | None = None

    @property
    def base(self) -> Memory:
        return self.root_memory if self.root_memory is not None else self.mem

    @property
    def user(self) -> str:
        return self.mem.scope.user_id

    @property
    def agent(self) -> str:
        return self.mem.scope.agent_name

    def url(self, path: str, **params: object) -> str:
        """``path`` with the scope and ``params`` (``None`` values left out), escaped for an attribute."""
        query = {"user": self.user, "agent": self.agent,
                 **{k: str(v) for k, v in params.items() if v is not None and v != ""}}
        return esc(f"{path}?{urlencode(query)}")

    def param(self, name: str, default: str = "") -> str:
        return self.params.get(name, default)


def form(view: View, action: str, body: str, button: str, *, css: str = "", confirm: str = "") -> str:
    """A POST form with the CSRF token and the scope; ``confirm``: a checkbox that must be ticked."""
    tick = (f'<label class=confirm><input type=checkbox name=confirm value=yes required> {esc(confirm)}</label>'
            if confirm else "")
    return (f'<form method=post action="{esc(action)}" class="{esc(css)}">'
            f'<input type=hidden name=csrf value="{esc(view.csrf)}">'
            f'<input type=hidden name=user value="{esc(view.user)}">'
            f'<input type=hidden name=agent value="{esc(view.agent)}">'
            f'{body}{tick}<button type=submit>{esc(button)}</button></form>')


def hidden(name: str, value: object) -> str:
    return f'<input type=hidden name="{esc(name)}" value="{esc(value)}">'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    """A table; ``rows`` hold ready HTML cells (escape text with :func:`esc` first)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{esc(css)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def pre(text: str, css: str = "") -> str:
    return f'<pre class="{esc(css)}">{esc(text)}</pre>'


def diff_html(diff: str) -> str:
    """A unified diff, its added and removed lines marked."""
    lines = []
    for line in diff.splitlines():
        kind = "add" if line.startswith("+") and not line.startswith("+++") else (
            "del" if line.startswith("-") and not line.startswith("---") else "ctx")
        lines.append(f'<span class="{kind}">{esc(line)}</span>')
    return '<pre class=diff>' + "\n".join(lines) + "</pre>" if lines else "<p class=muted>no change</p>"


def _scope_picker(view: View, path: str) -> str:
    options = "".join(f'<option value="{esc(u)}">' for u in dict.fromkeys(u for u, _ in view.scopes))
    agents = "".join(f'<option value="{esc(a)}">' for a in dict.fromkeys(a for _, a in view.scopes))
    return (f'<form method=get action="{esc(path)}" class=scope>'
            f'<label>user <input name=user value="{esc(view.user)}" list=users></label>'
            f'<label>agent <input name=agent value="{esc(view.agent)}" list=agents></label>'
            f'<datalist id=users>{options}</datalist><datalist id=agents>{agents}</datalist>'
            '<button type=submit>Open scope</button></form>')


def page(view: View, title: str, body: str) -> str:
    """The whole document: navigation, scope picker, flash messages, ``body``."""
    nav = "".join(f'<a href="{view.url(path)}"{" class=here" if path == view.path else ""}>{esc(label)}</a>'
                  for path, label in PAGES)
    notes = "".join(f'<p class="flash {kind}" role=status>{esc(view.param(kind))}</p>'
                    for kind in ("msg", "err") if view.param(kind))
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>{esc(title)} - tiermem</title><link rel=stylesheet href=/ui.css></head><body>"
            f"<header><strong>tiermem</strong><nav>{nav}</nav>{_scope_picker(view, view.path)}</header>"
            f"<main><h1>{esc(title)}</h1>{notes}{body}</main></body></html>")


def error_page(title: str, message: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)} - tiermem</title>"
            f"<link rel=stylesheet href=/ui.css></head><body><main><h1>{esc(title)}</h1>"
            f"<p class='flash err'>{esc(message)}</p><p><a href=/core>back</a></p></main></body></html>")


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f7f7f9}
header{display:flex;flex-wrap:wrap;gap:1em;align-items:center;padding:.6em 1em;background:#1d2330;color:#fff}
header a{color:#cfd8ff;margin-right:.8em;text-decoration:none}header a.here{color:#fff;font-weight:bold}
header form.scope{margin-left:auto;display:flex;gap:.4em}header input{width:9em}
main{padding:1em 1.5em;max-width:1200px}
table{border-collapse:collapse;width:100%;margin:.5em 0 1.5em}th,td{border-bottom:1px solid #ddd;padding:.3em .5em;
text-align:left;vertical-align:top}th{background:#eceef3}
pre{background:#fff;border:1px solid #ddd;padding:.6em;white-space:pre-wrap;word-break:break-word}
pre.diff .add{color:#126b12;background:#e8f7e8}pre.diff .del{color:#9b1c1c;background:#fbeaea}
.flash{padding:.5em;border-radius:4px}.msg{background:#e3f4e3}.err{background:#fbe3e3}
.muted{color:#667}form{display:inline-block;margin:.2em 0}textarea{width:100%;min-height:3em}
section.version,section.day{background:#fff;border:1px solid #ddd;border-radius:4px;padding:.4em 1em;margin:1em 0}
.record{margin:.2em 0 .2em 1em}.heading{font-weight:bold;margin-top:.6em}
.why span{display:inline-block;margin-right:.6em}.confirm{margin:0 .4em}
"""
