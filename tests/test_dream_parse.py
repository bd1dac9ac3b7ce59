"""Reading Deep Dream replies as models write them: markers, fences, <think>, stray prose."""

from __future__ import annotations

import pytest

from tiermem.dream.parse import Bullet, DreamReplyError, parse_dream_reply, render_memory

PLAIN = "[MEMORY]\n## Work\n- Works at Acme.\n- Uses Go.\n\n## Home\n- Lives in Lyon.\n\n[DREAM]\nAdded Go.\n"


def texts(raw: str) -> list[tuple[str, str | None]]:
    return [(b.text, b.heading) for b in parse_dream_reply(raw).bullets]


def test_plain_reply() -> None:
    reply = parse_dream_reply(PLAIN)
    assert [(b.text, b.heading) for b in reply.bullets] == [
        ("Works at Acme.", "Work"), ("Uses Go.", "Work"), ("Lives in Lyon.", "Home")]
    assert reply.diary == "Added Go." and reply.has_diary and reply.dropped_lines == []


@pytest.mark.parametrize("raw", [
    "**[MEMORY]**\n- Works at Acme.\n**[DREAM]**\nAdded.",
    "### [ Memory ]\n- Works at Acme.\n### [Dream]\nAdded.",
    "[memory]:\n- Works at Acme.\n[dream]:\nAdded.",
    "<memory>\n- Works at Acme.\n</memory>\n<dream>\nAdded.\n</dream>",
    "## MEMORY\n- Works at Acme.\n## DREAM\nAdded.",  # bare words only when there is no bracketed marker
    "**Memory:**\n- Works at Acme.\n**Dream:**\nAdded.",
    "<think>I should write [MEMORY] with bullets like - Fake.</think>\n[MEMORY]\n- Works at Acme.\n[DREAM]\nAdded.",
    "Here is the update.\n```markdown\n[MEMORY]\n- Works at Acme.\n```\n```\n[DREAM]\nAdded.\n```",
    "[MEMORY] - Works at Acme.\n[DREAM] Added.",
    "[MEMORY]\r\n- Works at Acme.\r\n[DREAM]\r\nAdded.\r\n",
    "[DREAM]\nAdded.\n[MEMORY]\n- Works at Acme.\n",
    "[Dream Diary]\nAdded.\n[MEMORY.md]\n- Works at Acme.\n",
])
def test_marker_variations(raw: str) -> None:
    reply = parse_dream_reply(raw)
    assert [b.text for b in reply.bullets] == ["Works at Acme."]
    assert reply.diary == "Added."


def test_bullet_styles_headings_continuations_and_junk() -> None:
    raw = ("[MEMORY]\n# MEMORY.md\nSure, here is the memory:\n* Star bullet.\n+ Plus bullet.\n1. Numbered.\n"
           "- Wrapped bullet that\n  continues here.\n#### Deep heading\n- Under it.\n## Empty heading\n"
           "- STAR BULLET.\nNot a bullet line.\n[DREAM]\n- diary bullet stays in the diary\n")
    reply = parse_dream_reply(raw)
    assert [(b.text, b.heading) for b in reply.bullets] == [
        ("Star bullet.", None), ("Plus bullet.", None), ("Numbered.", None),
        ("Wrapped bullet that continues here.", None), ("Under it.", "Deep heading")]
    assert reply.dropped_lines == ["Sure, here is the memory:", "Not a bullet line."]
    assert reply.diary == "- diary bullet stays in the diary"


def test_the_last_memory_section_wins() -> None:
    raw = "[MEMORY]\n- Draft.\n[DREAM]\nOops, again:\n[MEMORY]\n- Final.\n[DREAM]\nDone."
    reply = parse_dream_reply(raw)
    assert [b.text for b in reply.bullets] == ["Final."] and reply.diary == "Done."


def test_missing_diary_is_not_an_error() -> None:
    reply = parse_dream_reply("[MEMORY]\n- Works at Acme.\n")
    assert reply.diary == "" and not reply.has_diary


def test_unterminated_think_block_drops_the_rest() -> None:
    with pytest.raises(DreamReplyError, match=r"no \[MEMORY\] section"):
        parse_dream_reply("<think>[MEMORY]\n- Thinking out loud about [MEMORY]")


@pytest.mark.parametrize(("raw", "message"), [
    ("", "empty reply"),
    ("   \n", "empty reply"),
    ("Here is your memory: - Works at Acme.", r"no \[MEMORY\] section"),
    ("[MEMORY]\nNothing changed.\n[DREAM]\nNothing.", "no '- ' bullets"),
    ("[MEMORY]\n## Work\n[DREAM]\nNothing.", "no '- ' bullets"),
])
def test_unusable_replies_raise_with_the_raw_reply(raw: str, message: str) -> None:
    with pytest.raises(DreamReplyError, match=message) as info:
        parse_dream_reply(raw)
    assert info.value.raw == raw


def test_render_groups_bullets_under_headings() -> None:
    bullets = [Bullet("A."), Bullet("B.", "Work"), Bullet("C.", "Home"), Bullet("D.", "Work"), Bullet("E.")]
    assert render_memory(bullets) == "- A.\n- E.\n\n## Work\n- B.\n- D.\n\n## Home\n- C.\n"
    assert render_memory([]) == ""


def test_render_then_parse_round_trips() -> None:
    reply = parse_dream_reply(PLAIN)
    again = parse_dream_reply("[MEMORY]\n" + render_memory(reply.bullets))
    assert again.bullets == reply.bullets
