"""What one Deep Dream reads of its window: the newest Daily records within ``dream_input_tokens``.

Daily records are lossless, so one day can hold far more text than one LLM call takes (a single
message may be 100,000 characters). The dream therefore reads the window *newest first*: days from
the most recent back, and within a day from its last record back, while the text fits the budget.
The oldest records of the window are left out, and the result and the diary say how many.

- A day whose records were all read is *whole*: the dream marks it consolidated, naming the bytes
  it read (length and SHA-256), so retention removes the file only while it is still exactly
  those bytes — nothing appended or edited since (R12).
- A day with records left out is *partial* (or not read at all): it is never marked consolidated,
  so retention keeps what no dream has read (R12). Once one record does not fit, every older one is
  left out too: the text sent is always the most recent part of the window. (A mark an earlier
  dream made of the day stays: it names bytes that dream did read.)
- A day read from record ``k`` on starts with a line that says how many earlier records were left
  out, then the heading of the block its first record belongs to.
- When even the newest record alone is over the budget, its beginning is read up to the budget and
  cut with a visible "[… N characters of this record omitted …]"; its day is partial.

The budget counts the Daily text sent, each day's ``=== date ===`` header included
(:func:`~tiermem.tokens.count_tokens`); the instructions and ``MEMORY.md`` come on top of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

from tiermem.dream.prompt import DailySource, day_header
from tiermem.tiers.markdown import Record, parse_records
from tiermem.tokens import count_tokens, truncate_to_tokens

MIN_CUT_TOKENS = 64  # a record cut to fit keeps at least this much of its beginning
MARKER_TOKENS = 24  # room kept for the left-out note and the cut marker


@dataclass(frozen=True)
class DreamInput:
    """The Daily text one dream sends, and what it left out."""

    dailies: list[DailySource]  # oldest first; a partial day's text starts with the left-out note
    whole_days: list[date] = field(default_factory=list)  # every record read whole
    partial_days: list[date] = field(default_factory=list)  # some or all records left out
    left_out: int = 0  # records not read whole (a cut record counts)
    tokens: int = 0  # the Daily text sent, headers included

    def note(self, budget: int) -> str:
        """One sentence for the diary and the result ("" when nothing was left out)."""
        if not self.left_out:
            return ""
        days = ", ".join(d.isoformat() for d in self.partial_days)
        return (f"{self.left_out} older record(s) of {days} left out: over the dream input budget of {budget}"
                " tokens (dream_input_tokens); those days are not marked consolidated")


@dataclass(frozen=True)
class _Fit:
    """What is read of one day."""

    text: str
    skipped: int  # records not read at all
    cut: bool = False  # the newest record read in part


def _heading_above(lines: list[str], line_number: int) -> int | None:
    """0-based index of the nearest ``## `` heading above the 1-based ``line_number``."""
    return next((i for i in range(line_number - 2, -1, -1) if lines[i].startswith("## ")), None)


def _note(skipped: int) -> str:
    return f"[… {skipped} earlier record(s) of this day left out: over the dream input budget]"


def _suffix(lines: list[str], records: Sequence[Record], k: int) -> str:
    """The day's text from record ``k`` on: the left-out note and its block's heading first."""
    if k == 0:
        return "\n".join(lines)
    start = records[k - 1].line_end  # 0-based index of the first line after record k-1
    heading = _heading_above(lines, records[k].line_start)
    head = [lines[heading]] if heading is not None and heading < start else []
    return "\n".join([_note(k), *head, *lines[start:]])


def _fit_day(source: DailySource, records: Sequence[Record], room: int) -> _Fit | None:
    """The longest suffix of the day (newest records) that fits ``room`` tokens, or ``None`` when
    not even its newest record fits."""
    lines = source.text.split("\n")
    costs = [count_tokens("\n".join(lines[(records[i - 1].line_end if i else 0):r.line_end])) + 1
             for i, r in enumerate(records)]
    total, k = 0, len(records)
    while k > 0 and total + costs[k - 1] <= room:
        total, k = total + costs[k - 1], k - 1
    while k < len(records):  # the note and heading cost a little too: check the real text
        text = _suffix(lines, records, k)
        if count_tokens(text) <= room:
            return _Fit(text, k)
        k += 1
    return None


def _cut_newest(source: DailySource, records: Sequence[Record], room: int) -> _Fit:
    """The beginning of the day's newest record, cut to fit ``room``, with a visible marker."""
    lines = source.text.split("\n")
    last = records[-1]
    body = "\n".join(lines[last.line_start - 1:last.line_end])
    kept = truncate_to_tokens(body, max(room - 2 * MARKER_TOKENS, MIN_CUT_TOKENS))
    heading = _heading_above(lines, last.line_start)
    parts = [_note(len(records) - 1)] if len(records) > 1 else []
    parts += [lines[heading]] if heading is not None else []
    parts += [kept, f"[… {len(body) - len(kept)} characters of this record omitted: over the dream input budget]"]
    return _Fit("\n".join(parts), len(records) - 1, cut=True)


def fit_to_budget(dailies: Sequence[DailySource], budget: int) -> DreamInput:
    """The newest records of ``dailies`` within ``budget`` tokens (see the module docstring)."""
    sent: list[DailySource] = []
    whole: list[date] = []
    partial: list[date] = []
    left_out = used = 0
    full = False
    for source in sorted(dailies, key=lambda d: d.day, reverse=True):
        records = parse_records(source.text)
        if not records:
            continue
        room = budget - used - count_tokens(day_header(source.day)) - 2
        fit = None if full else _fit_day(source, records, room)
        if fit is None and not sent:  # the newest record alone is over the budget
            fit = _cut_newest(source, records, room)
        if fit is None:
            full = True
            partial.append(source.day)
            left_out += len(records)
            continue
        sent.append(DailySource(source.day, fit.text))
        used = budget - room + count_tokens(fit.text)
        left_out += fit.skipped + int(fit.cut)
        if fit.skipped or fit.cut:
            partial.append(source.day)
            full = True
        else:
            whole.append(source.day)
    return DreamInput(sorted(sent, key=lambda d: d.day), sorted(whole), sorted(partial), left_out, used)
