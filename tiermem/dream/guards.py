"""Guards on a rewrite of ``MEMORY.md`` (R41): nothing empty, nothing destroyed, nothing unbounded.

Decisions:

- **Empty**: a rewrite without bullets is always refused, even when forced (``rollback`` exists
  for a person who wants an empty file: they can edit it by hand).
- **Loss**: a prior bullet counts as *kept* when one new bullet contains it (case and
  whitespace folded), or covers at least half of its content words (stemmed words and numbers,
  stop words left out), or two new bullets together cover at least 70% of them. So a bullet
  that was merged, reworded or *updated* ("Lives in Lyon" -> "Lives in Munich", a change the
  no-fabrication check has already vetted against the sources) is kept; one whose subject is
  gone is lost. More than ``max_loss`` (25%) of the prior bullets lost -> refused unless forced.
- **Budget**: more bullets or tokens than the budget -> refused unless forced, but only when the
  rewrite is also larger than the prior memory (a hand-written file that was already over budget
  does not block every later dream).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tiermem.dream.prompt import DreamBudget
from tiermem.dream.text import content_keys, tokenize
from tiermem.tokens import count_tokens

MAX_LOSS = 0.25
KEEP_SINGLE = 0.5
KEEP_PAIR = 0.7


@dataclass(frozen=True)
class GuardVerdict:
    """``ok`` or the ``reason`` for refusing; ``lost``: prior bullets the rewrite drops."""

    ok: bool
    reason: str = ""
    lost: list[str] = field(default_factory=list)
    loss_ratio: float = 0.0
    forced: bool = False


def _fold(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(" .;")


def is_kept(prior: str, new_bullets: Sequence[str]) -> bool:
    """Whether ``prior`` survives in ``new_bullets`` (contained, merged, reworded or updated)."""
    folded = _fold(prior)
    if any(folded in _fold(n) for n in new_bullets):
        return True
    keys = content_keys(tokenize(prior))
    if not keys:
        return True  # nothing to lose
    covers = sorted((keys & content_keys(tokenize(n)) for n in new_bullets), key=len, reverse=True)
    if covers and len(covers[0]) / len(keys) >= KEEP_SINGLE:
        return True
    return len(covers) >= 2 and len(covers[0] | covers[1]) / len(keys) >= KEEP_PAIR


def check_rewrite(
    prior: Sequence[str],
    new: Sequence[str],
    new_text: str,
    prior_text: str,
    budget: DreamBudget,
    force: bool = False,
    max_loss: float = MAX_LOSS,
) -> GuardVerdict:
    """Judge a rewrite from the prior bullets to the new ones (texts: the rendered files)."""
    if not new:
        return GuardVerdict(False, "the rewrite has no bullets left (empty MEMORY.md refused)")
    lost = [p for p in prior if not is_kept(p, new)]
    ratio = len(lost) / len(prior) if prior else 0.0
    if ratio > max_loss and not force:
        return GuardVerdict(False, f"the rewrite loses {len(lost)} of {len(prior)} prior bullets "
                                   f"({ratio:.0%} > {max_loss:.0%}); use force to accept", lost, ratio)
    tokens, prior_tokens = count_tokens(new_text), count_tokens(prior_text)
    over = len(new) > budget.max_bullets or tokens > budget.max_tokens
    grew = len(new) > len(prior) or tokens > prior_tokens
    if over and grew and not force:
        return GuardVerdict(False, f"the rewrite is over budget ({len(new)} bullets, {tokens} tokens; budget "
                                   f"{budget.max_bullets} bullets, {budget.max_tokens} tokens)", lost, ratio)
    forced = force and (ratio > max_loss or (over and grew))
    return GuardVerdict(True, "", lost, ratio, forced)
