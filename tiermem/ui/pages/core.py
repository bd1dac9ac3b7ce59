"""The Core page: ``MEMORY.md`` now, and every kept version with its diff, diary and rollback.

A version is the text a rewrite *replaced* (:class:`~tiermem.storage.dreams.CoreVersion`), so its
diff is against the text that followed it: the next newer version, or ``MEMORY.md`` now for the
newest. A version a dream replaced comes with that dream's diary entry and the bullets the dream
dropped as unsupported by the sources (:mod:`tiermem.ui.diary`).
"""

from __future__ import annotations

from collections.abc import Mapping

from tiermem import validate
from tiermem.clock import utc_iso
from tiermem.dream.runner import unified_diff
from tiermem.storage.dreams import CoreVersion
from tiermem.ui.diary import DiaryEntry, diary_entries
from tiermem.ui.html import View, diff_html, esc, form, hidden, pre

DEFAULT_VERSIONS = 20


def render(view: View) -> str:
    mem = view.mem
    text = mem.core.read()
    versions = mem.dream_versions()
    shown = max(1, validate.whole_number(view.param("versions", str(DEFAULT_VERSIONS)), "versions"))
    diaries = diary_entries(mem.core) if versions else {}
    current = (f"<p class=muted>{len(mem.core.items())} bullets; file {esc(mem.core.path)}</p>" + pre(text, "core")
               if text else "<p class=muted>MEMORY.md is empty.</p>")
    parts = [f"<h2>MEMORY.md now</h2>{current}", f"<h2>Versions ({len(versions)})</h2>"]
    if not versions:
        parts.append("<p class=muted>No kept versions: a Deep Dream, an edit or a rollback keeps the text it "
                     "replaces.</p>")
    for index, version in enumerate(versions[:shown]):
        after = versions[index - 1].content if index > 0 else text
        parts.append(_version(view, version, after, diaries.get(version.id)))
    if len(versions) > shown:
        parts.append(f'<p><a href="{view.url("/core", versions=len(versions))}">show all {len(versions)} '
                     "versions</a></p>")
    return "".join(parts)


def _version(view: View, version: CoreVersion, after: str, diary: DiaryEntry | None) -> str:
    title = (f"Version {version.id} <span class=muted>{esc(utc_iso(version.created_at)[:19])}Z, replaced by "
             f"{esc(version.cause)}, {version.bullets} bullets</span>")
    button = form(view, "/core/rollback", hidden("version", version.id), f"Roll back to version {version.id}")
    body = [f'<section class=version id="v{version.id}"><h3>{title}</h3>{button}',
            "<details><summary>Diff to the text that replaced it</summary>"
            f"{diff_html(unified_diff(version.content, after))}</details>",
            f"<details><summary>Text of version {version.id}</summary>{pre(version.content)}</details>"]
    if diary is not None:
        body.append(f"<h4>Dream diary, {esc(diary.day)} {esc(diary.time)}</h4>{pre(diary.text, 'diary')}")
        if diary.dropped:
            items = "".join(f"<li>{esc(line)}</li>" for line in diary.dropped)
            body.append(f"<h4>Dropped as unsupported by the sources ({len(diary.dropped)})</h4>"
                        f"<ul class=dropped>{items}</ul>")
        if diary.lost:
            items = "".join(f"<li>{esc(line)}</li>" for line in diary.lost)
            body.append(f"<h4>Prior bullets not kept (forced)</h4><ul>{items}</ul>")
    elif version.cause == "dream":
        body.append("<p class=muted>No diary entry names this version.</p>")
    return "".join(body) + "</section>"


def rollback(view: View, data: Mapping[str, str]) -> str:
    """POST /core/rollback: restore a version through :meth:`Memory.rollback`."""
    version = validate.whole_number(data.get("version", ""), "version", 1)
    result = view.mem.rollback(version)
    saved = f"; the replaced text is version {result.saved_version_id}" if result.saved_version_id else ""
    return f"restored version {result.restored.id}{saved}"
