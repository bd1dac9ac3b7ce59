"""The web viewer's ASGI app: pages (GET) and changes (POST with a CSRF token) over one Memory.

Each page is a ``render(view) -> html`` function of :mod:`tiermem.ui.pages`, each change an
``action(view, form) -> message`` that calls the library's public API (so validation,
redaction and the audit apply as everywhere else) and answers ``303`` back to its page with the
message (post/redirect/get). Library calls run in worker threads, never on the event loop.
The scope comes from the ``user``/``agent`` parameters (default: the scope the server was started
with); other scopes of the same root open through :meth:`Memory.for_scope`.

Everything sits behind :class:`~tiermem.ui.guard.UiGuard` (bind address, Host/Origin, token).
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from tiermem import validate
from tiermem.errors import InvalidInput, NotFound, TiermemError
from tiermem.storage.facts import FactRepository
from tiermem.ui.guard import UiGuard
from tiermem.ui.html import CSS, SECURITY_HEADERS, View, error_page, page
from tiermem.ui.pages import calls, core, facts, journal, prompt, queue, search

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from tiermem.mcp.http import ASGIApp, HttpOptions
    from tiermem.memory import Memory

log = logging.getLogger(__name__)

Render = Callable[[View], str]
Action = Callable[[View, Mapping[str, str]], str]

PAGES: dict[str, tuple[str, Render]] = {
    "/core": ("Core memory", core.render),
    "/journal": ("Journal", journal.render),
    "/facts": ("Facts", facts.render),
    "/search": ("Search", search.render),
    "/prompt": ("Prompt", prompt.render),
    "/queue": ("Update queue", queue.render),
    "/calls": ("LLM calls", calls.render),
}
#: POST path -> (the page it returns to, the change)
ACTIONS: dict[str, tuple[str, Action]] = {
    "/core/rollback": ("/core", core.rollback),
    "/facts/edit": ("/facts", facts.edit),
    "/facts/delete": ("/facts", facts.delete),
    "/facts/purge": ("/facts", facts.purge),
    "/queue/retry": ("/queue", queue.retry),
    "/queue/flush": ("/queue", queue.flush),
}
MAX_FORM_BYTES = 1_000_000
#: form fields carried back to the page after a change (form name -> query name)
_KEPT = (("q", "q"), ("category_filter", "category"), ("page", "page"))


class Viewer:
    """The pages and changes of one server: the Memory it opened and the forms' CSRF token."""

    def __init__(self, mem: Memory, csrf: str | None = None) -> None:
        self.mem = mem
        self.csrf = csrf or secrets.token_urlsafe(32)

    def _view(self, path: str, params: Mapping[str, str]) -> View:
        user = params.get("user") or self.mem.scope.user_id
        agent = params.get("agent") or self.mem.scope.agent_name
        scoped = self.mem if (user, agent) == (self.mem.scope.user_id, self.mem.scope.agent_name) else (
            self.mem.for_scope(user, agent))
        known = [(s.user_id, s.agent_name) for s in FactRepository(self.mem.db).scopes()]
        return View(scoped, path, params, self.csrf, [(self.mem.scope.user_id, self.mem.scope.agent_name), *known],
                    root_memory=self.mem)

    def render(self, path: str, params: Mapping[str, str]) -> tuple[int, str]:
        """The page at ``path``: ``(status, html)``; a library error shows on the page (400/404)."""
        title, render = PAGES[path]
        view: View | None = None
        try:
            view = self._view(path, params)
            return 200, page(view, title, render(view))
        except TiermemError as exc:
            status = 404 if isinstance(exc, NotFound) else 400
            if view is None:
                return status, error_page(title, str(exc))
            return status, page(view, title, f"<p class='flash err'>{_esc(str(exc))}</p>")

    def act(self, path: str, data: Mapping[str, str]) -> str:
        """Run the change at ``path``; returns the URL to go back to, with the message."""
        target, action = ACTIONS[path]
        params = {"user": data.get("user", ""), "agent": data.get("agent", "")}
        params |= {query: data[name] for name, query in _KEPT if data.get(name)}
        try:
            view = self._view(target, params)
            params["msg"] = action(view, data)
        except TiermemError as exc:
            params["err"] = str(exc) or type(exc).__name__
        return f"{target}?{urlencode({k: v for k, v in params.items() if v})}"

    def csrf_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8"), self.csrf.encode("ascii"))


def _esc(text: str) -> str:
    from tiermem.ui.html import esc

    return esc(text)


def _html(status: int, body: str) -> Response:
    from starlette.responses import HTMLResponse

    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


def starlette_app(viewer: Viewer) -> Starlette:
    """The unguarded app (tests wrap it, :func:`build_app` guards it)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import RedirectResponse, Response
    from starlette.routing import Route

    async def show(request: Request) -> Response:
        status, body = await run_in_threadpool(viewer.render, request.url.path, dict(request.query_params))
        return _html(status, body)

    async def change(request: Request) -> Response:
        try:
            size = validate.whole_number(request.headers.get("content-length", ""), "the Content-Length header")
        except InvalidInput as exc:
            return _html(400, error_page("Bad request", str(exc)))
        if size > MAX_FORM_BYTES:
            return _html(413, error_page("Too large", f"a form must be under {MAX_FORM_BYTES} bytes"))
        async with request.form() as submitted:
            data = {key: value for key, value in submitted.items() if isinstance(value, str)}
        if not viewer.csrf_ok(data.get("csrf", "")):
            return _html(403, error_page("Refused", "missing or wrong CSRF token: reload the page and try again"))
        target = await run_in_threadpool(viewer.act, request.url.path, data)
        return RedirectResponse(target, status_code=303, headers={"cache-control": "no-store"})

    async def home(request: Request) -> Response:
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"/core{query}", status_code=303)

    async def stylesheet(request: Request) -> Response:
        return Response(CSS, media_type="text/css", headers={"x-content-type-options": "nosniff"})

    routes = [Route("/", home), Route("/ui.css", stylesheet),
              *(Route(path, show, methods=["GET"]) for path in PAGES),
              *(Route(path, change, methods=["POST"]) for path in ACTIONS)]
    return Starlette(routes=routes)


def build_app(mem: Memory, options: HttpOptions, csrf: str | None = None) -> ASGIApp:
    """The guarded viewer app for ``mem`` (``options``: from :func:`tiermem.ui.guard.ui_options`)."""
    return UiGuard(starlette_app(Viewer(mem, csrf)), options)
