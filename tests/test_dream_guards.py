"""The rewrite guards (R41): kept vs lost prior bullets, the 25% rule, the budget."""

from __future__ import annotations

from tiermem.dream.guards import check_rewrite, is_kept
from tiermem.dream.prompt import DreamBudget

PRIOR = ["Lives in Lyon with partner Claire.", "Works as a backend engineer at Acme Corp.",
         "Has a cat named Pixel.", "Prefers dark mode in every editor."]
BUDGET = DreamBudget()


def test_kept_when_contained_merged_reworded_or_updated() -> None:
    assert is_kept("Has a cat named Pixel.", ["Has a cat named Pixel, who hates car rides."])
    assert is_kept("Lives in Lyon with partner Claire.", ["Lives in Munich with partner Claire."])  # updated
    assert is_kept("Prefers dark mode in every editor.", ["Dark mode preferred in all editors."])
    assert is_kept("Moved to Munich in March and works at Siemens.",
                   ["Moved to Munich in March.", "Works at Siemens as a platform engineer."])  # split in two


def test_lost_when_the_subject_is_gone() -> None:
    assert not is_kept("Has a cat named Pixel.", ["Lives in Munich with partner Claire."])
    assert not is_kept("Prefers dark mode in every editor.", [])


def test_more_than_a_quarter_lost_is_refused_unless_forced() -> None:
    new = PRIOR[:2]
    refused = check_rewrite(PRIOR, new, "- a\n- b\n", "", BUDGET)
    assert not refused.ok and "loses 2 of 4" in refused.reason and refused.loss_ratio == 0.5
    assert refused.lost == PRIOR[2:]
    forced = check_rewrite(PRIOR, new, "- a\n- b\n", "", BUDGET, force=True)
    assert forced.ok and forced.forced and forced.lost == PRIOR[2:]
    quarter = check_rewrite(PRIOR, PRIOR[:3], "", "", BUDGET)
    assert quarter.ok and not quarter.forced and quarter.loss_ratio == 0.25


def test_empty_is_refused_even_when_forced() -> None:
    for force in (False, True):
        verdict = check_rewrite(PRIOR, [], "", "", BUDGET, force=force)
        assert not verdict.ok and "empty" in verdict.reason


def test_no_prior_bullets_means_no_loss() -> None:
    assert check_rewrite([], ["New fact."], "- New fact.\n", "", BUDGET).ok


def test_budget_refuses_growth_past_it_unless_forced() -> None:
    small = DreamBudget(max_bullets=3, max_tokens=1000)
    grown = PRIOR + ["Started at Siemens."]
    text = "".join(f"- {b}\n" for b in grown)
    verdict = check_rewrite(PRIOR, grown, text, "", small)
    assert not verdict.ok and "over budget (5 bullets" in verdict.reason
    assert check_rewrite(PRIOR, grown, text, "", small, force=True).forced
    # a memory that was already over budget may be rewritten without growing
    prior_text = "".join(f"- {b}\n" for b in PRIOR)
    assert check_rewrite(PRIOR, PRIOR, prior_text, prior_text, small).ok
