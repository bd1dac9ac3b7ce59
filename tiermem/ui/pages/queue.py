"""The Queue page: the durable update queue's items - pending, failed (waiting to retry), dead.

An item is *failed* while it waits for its next attempt after an error (pending with attempts
and a last error); *dead* once it ran out of attempts (dead-letter). The buttons are the CLI's
``tiermem queue retry`` (dead items back in the queue, then processed; each dead item also has a
button of its own) and ``tiermem queue flush`` (process everything now), both through
:class:`~tiermem.queue.worker.UpdateQueue`.
"""

from __future__ import annotations

from collections.abc import Mapping

from tiermem import validate
from tiermem.clock import utc_iso
from tiermem.storage.outbox import OutboxItem, OutboxRepository
from tiermem.ui.html import View, esc, form, hidden, table

FLUSH_SECONDS = 120.0
PREVIEW_CHARS = 160


def kind(item: OutboxItem) -> str:
    """``dead``, ``processing``, ``failed`` or ``pending``."""
    if item.status in ("dead", "processing"):
        return item.status
    return "failed" if item.attempts or item.last_error else "pending"


def _preview(item: OutboxItem) -> str:
    texts = [str(m.get("content", "")) for m in item.messages if isinstance(m, dict)]
    text = " | ".join(t for t in texts if t)
    return text[:PREVIEW_CHARS] + ("..." if len(text) > PREVIEW_CHARS else "")


def render(view: View) -> str:
    outbox = OutboxRepository(view.mem.db)
    counts = outbox.counts()
    items = outbox.items(scope=view.mem.scope)
    summary = ", ".join(f"{esc(status)} {n}" for status, n in sorted(counts.items())) or "empty"
    parts = [f"<p class=muted>Whole store: {summary}. Items of {esc(view.user)}/{esc(view.agent)} below.</p>",
             form(view, "/queue/retry", "", "Retry dead-letter items (every scope)"), " ",
             form(view, "/queue/flush", "", "Process the queue now")]
    for name in ("pending", "processing", "failed", "dead"):
        group = [i for i in items if kind(i) == name]
        parts.append(f"<h2>{name.capitalize()} ({len(group)})</h2>")
        if not group:
            parts.append("<p class=muted>none</p>")
            continue
        rows = [[str(i.id), esc(i.thread_id), esc(utc_iso(i.enqueued_at)[:19]), str(i.attempts),
                 esc(utc_iso(i.not_before)[:19]), esc(i.last_error or ""), esc(_preview(i))] for i in group]
        headers = ["id", "thread", "enqueued", "attempts", "not before", "last error", "messages"]
        if name == "dead":  # each dead item can be retried on its own
            headers.append("")
            for row, item in zip(rows, group, strict=True):
                row.append(form(view, "/queue/retry", hidden("id", item.id), f"Retry item {item.id}"))
        parts.append(table(headers, rows, f"queue {name}"))
    return "".join(parts)


def retry(view: View, data: Mapping[str, str]) -> str:
    """POST /queue/retry: dead items (one with ``id``, else all) back in the queue
    (``retry_dead``), then processed now."""
    ids = [validate.whole_number(data["id"], "item id", 1, 2**62)] if data.get("id") else None
    count = view.base.queue.retry_dead(ids)
    drained = view.base.queue.flush(timeout=FLUSH_SECONDS)
    return f"retried {count} dead item(s); the queue is {'empty' if drained else 'not empty yet'}"


def flush(view: View, data: Mapping[str, str]) -> str:
    """POST /queue/flush: process every pending item now (failed ones too, their backoff ignored)."""
    drained = view.base.queue.flush(timeout=FLUSH_SECONDS)
    return "the queue is empty" if drained else "items are left in the queue (see the list)"
