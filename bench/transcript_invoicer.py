"""Transcript 1 (OpenAI shape): fixing a small invoicing package, then a few follow-ups."""

# Tool outputs below are reproduced verbatim (long lines, trailing spaces as pytest prints them).
# ruff: noqa: E501, W291, W293

from __future__ import annotations

from transcript_kit import Session, pytest_output

ROOT = "/home/dev/invoicer"

FILES = {
    "pyproject.toml": """[project]
name = "invoicer"
version = "0.3.0"
requires-python = ">=3.11"
dependencies = []

[project.scripts]
invoicer = "invoicer.cli:main"

[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.ruff]
line-length = 100
""",
    "README.md": """# invoicer

Small library and CLI to build invoices from a CSV of line items.

    invoicer build items.csv --customer "ACME GmbH" --due 2026-04-01
""",
    "CHANGELOG.md": """# Changelog

## 0.3.0
- Due dates can be given on the command line.
- Totals are rounded per line.

## 0.2.0
- CSV import.
""",
    "invoicer/__init__.py": '''"""Build invoices from line items."""

from invoicer.models import Invoice, LineItem

__all__ = ["Invoice", "LineItem"]
''',
    "invoicer/dates.py": '''"""Parsing and formatting of invoice dates."""

from __future__ import annotations

from datetime import date, datetime, timedelta

DEFAULT_TERMS_DAYS = 30
_FORMAT = "%d/%m/%Y"


def parse_due_date(text: str) -> date:
    """Parse a due date as written on an invoice."""
    text = text.strip()
    return datetime.strptime(text, _FORMAT).date()


def due_from_issue(issued: date, terms_days: int = DEFAULT_TERMS_DAYS) -> date:
    """The due date of an invoice issued on ``issued`` with ``terms_days`` of payment terms."""
    if terms_days < 0:
        raise ValueError("terms_days must be >= 0")
    return issued + timedelta(days=terms_days)


def format_date(value: date, style: str = "iso") -> str:
    if style == "iso":
        return value.isoformat()
    if style == "eu":
        return value.strftime("%d/%m/%Y")
    if style == "us":
        return value.strftime("%m/%d/%Y")
    raise ValueError(f"unknown date style: {style}")


def is_overdue(due: date, today: date) -> bool:
    return today > due
''',
    "invoicer/models.py": '''"""Invoice data model."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date


@dataclass(frozen=True)
class LineItem:
    description: str
    quantity: int
    unit_price: float
    vat_rate: float = 0.19


@dataclass
class Invoice:
    number: str
    customer: str
    issued: date
    due: date
    items: list[LineItem] = field(default_factory=list)
    discount_percent: float = 0.0

    def add(self, item: LineItem) -> None:
        if item.quantity <= 0:
            raise ValueError("quantity must be positive")
        self.items.append(item)
''',
    "invoicer/totals.py": '''"""Invoice totals: net, VAT and gross, rounded to cents."""

from __future__ import annotations

from invoicer.models import Invoice, LineItem


def line_net(item: LineItem) -> float:
    return round(item.quantity * item.unit_price, 2)


def net_total(invoice: Invoice) -> float:
    return sum(line_net(item) for item in invoice.items)


def vat_total(invoice: Invoice) -> float:
    return sum(line_net(item) * item.vat_rate for item in invoice.items)


def gross_total(invoice: Invoice) -> float:
    return net_total(invoice) + vat_total(invoice)
''',
    "invoicer/cli.py": '''"""Command line interface: ``invoicer build items.csv``."""

from __future__ import annotations

import argparse
import csv
import sys
from datetime import date

from invoicer.dates import due_from_issue, parse_due_date
from invoicer.models import Invoice, LineItem
from invoicer.totals import gross_total, net_total, vat_total


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="invoicer")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build an invoice from a CSV of line items")
    build.add_argument("items", help="CSV with description,quantity,unit_price[,vat_rate]")
    build.add_argument("--customer", required=True)
    build.add_argument("--number", default="DRAFT")
    build.add_argument("--due", help="due date (default: 30 days after today)")
    return parser


def read_items(path: str) -> list[LineItem]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [
        LineItem(row["description"], int(row["quantity"]), float(row["unit_price"]),
                 float(row.get("vat_rate") or 0.19))
        for row in rows
    ]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    today = date.today()
    due = parse_due_date(args.due) if args.due else due_from_issue(today)
    invoice = Invoice(args.number, args.customer, today, due, read_items(args.items))
    print(f"Invoice {invoice.number} for {invoice.customer}, due {due.isoformat()}")
    print(f"  net   {net_total(invoice):>10.2f}")
    print(f"  VAT   {vat_total(invoice):>10.2f}")
    print(f"  gross {gross_total(invoice):>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
''',
    "tests/test_dates.py": """from datetime import date

import pytest

from invoicer.dates import due_from_issue, format_date, is_overdue, parse_due_date


def test_parse_eu_due_date():
    assert parse_due_date("14/03/2026") == date(2026, 3, 14)


def test_parse_iso_due_date():
    assert parse_due_date("2026-03-14") == date(2026, 3, 14)


def test_due_from_issue_default_terms():
    assert due_from_issue(date(2026, 1, 31)) == date(2026, 3, 2)


def test_negative_terms_rejected():
    with pytest.raises(ValueError):
        due_from_issue(date(2026, 1, 1), -1)


def test_format_styles():
    d = date(2026, 3, 4)
    assert format_date(d) == "2026-03-04"
    assert format_date(d, "eu") == "04/03/2026"
    assert format_date(d, "us") == "03/04/2026"


def test_is_overdue():
    assert is_overdue(date(2026, 3, 1), date(2026, 3, 2))
    assert not is_overdue(date(2026, 3, 1), date(2026, 3, 1))
""",
    "tests/test_totals.py": """from datetime import date

from invoicer.models import Invoice, LineItem
from invoicer.totals import gross_total, net_total, vat_total


def make(*items: LineItem, discount: float = 0.0) -> Invoice:
    return Invoice("T-1", "Test", date(2026, 1, 1), date(2026, 2, 1), list(items), discount)


def test_net_total():
    inv = make(LineItem("a", 2, 10.0), LineItem("b", 1, 5.5))
    assert net_total(inv) == 25.5


def test_vat_total_is_rounded_to_cents():
    inv = make(LineItem("a", 3, 0.35), LineItem("b", 1, 0.35))
    assert vat_total(inv) == 0.27


def test_gross_total():
    inv = make(LineItem("a", 1, 100.0))
    assert gross_total(inv) == 119.0


def test_reduced_vat_rate():
    inv = make(LineItem("book", 1, 20.0, vat_rate=0.07))
    assert vat_total(inv) == 1.4
""",
}

_VAT_FAIL = """    def test_vat_total_is_rounded_to_cents():
        inv = make(LineItem("a", 3, 0.35), LineItem("b", 1, 0.35))
>       assert vat_total(inv) == 0.27
E       assert 0.26599999999999996 == 0.27
E        +  where 0.26599999999999996 = vat_total(Invoice(number='T-1', customer='Test', issued=datetime.date(2026, 1, 1), due=datetime.date(2026, 2, 1), items=[LineItem(description='a', quantity=3, unit_price=0.35, vat_rate=0.19), LineItem(description='b', quantity=1, unit_price=0.35, vat_rate=0.19)], discount_percent=0.0))

tests/test_totals.py:19: AssertionError"""

_ISO_FAIL = """    def test_parse_iso_due_date():
>       assert parse_due_date("2026-03-14") == date(2026, 3, 14)

tests/test_dates.py:13: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
invoicer/dates.py:14: in parse_due_date
    return datetime.strptime(text, _FORMAT).date()
/usr/lib/python3.11/_strptime.py:568: in _strptime_datetime
    tt, fraction, gmtoff_fraction = _strptime(data_string, format)
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

data_string = '2026-03-14', format = '%d/%m/%Y'

    def _strptime(data_string, format="%a %b %d %H:%M:%S %Y"):
        \"\"\"Return a 2-tuple consisting of a time struct and an int containing
        the number of microseconds based on the input string and the
        format string.\"\"\"
    
        for index, arg in enumerate([data_string, format]):
            if not isinstance(arg, str):
                msg = "strptime() argument {} must be str, not {}"
                raise TypeError(msg.format(index, type(arg)))
    
        global _TimeRE_cache, _regex_cache
        with _cache_lock:
            locale_time = _TimeRE_cache.locale_time
            if (_getlang() != locale_time.lang or
                time.tzname != locale_time.tzname or
                time.daylight != locale_time.daylight):
                _TimeRE_cache = TimeRE()
                _regex_cache.clear()
                locale_time = _TimeRE_cache.locale_time
            if len(_regex_cache) > _CACHE_MAX_SIZE:
                _regex_cache.clear()
            format_regex = _regex_cache.get(format)
            if not format_regex:
                try:
                    format_regex = _TimeRE_cache.compile(format)
                # KeyError raised when a bad format is found; can be specified as
                # \\\\, in which case it was a stray % but with a space after it
                except KeyError as err:
                    bad_directive = err.args[0]
                    if bad_directive == "\\\\":
                        bad_directive = "%"
                    del err
                    raise ValueError("'%s' is a bad directive in format '%s'" %
                                        (bad_directive, format)) from None
                # IndexError only occurs when the format string is "%"
                except IndexError:
                    raise ValueError("stray %% in format '%s'" % format) from None
                _regex_cache[format] = format_regex
        found = format_regex.match(data_string)
        if not found:
>           raise ValueError("time data %r does not match format %r" %
                             (data_string, format))
E           ValueError: time data '2026-03-14' does not match format '%d/%m/%Y'

/usr/lib/python3.11/_strptime.py:349: ValueError"""

_SUMMARY_ISO = (
    "FAILED tests/test_dates.py::test_parse_iso_due_date - ValueError: time data '2026-03-14' "
    "does not match format '%d/%m/%Y'"
)
_SUMMARY_VAT = "FAILED tests/test_totals.py::test_vat_total_is_rounded_to_cents - assert 0.26599999999999996 == 0.27"


def _pytest(rows: list[tuple[str, str]], failures: list[tuple[str, str]], summary: list[str], secs: float) -> str:
    return pytest_output(ROOT, rows, failures, summary, secs)


def _first_turn(s: Session) -> None:
    s.user(
        "The test suite is red on main since yesterday's merge: `pytest` fails in test_dates and "
        "test_totals. Can you find out why and fix it? Don't change the tests unless they're wrong."
    )
    s.do("I'll start by looking at the project layout and running the tests.", s.ls("."))
    full_fail = _pytest(
        [("tests/test_dates.py", ".F...."), ("tests/test_totals.py", ".F..")],
        [("test_parse_iso_due_date", _ISO_FAIL), ("test_vat_total_is_rounded_to_cents", _VAT_FAIL)],
        [_SUMMARY_ISO, _SUMMARY_VAT],
        0.09,
    )
    s.do(None, s.run("python -m pytest -q", full_fail, 1))
    s.do("Two separate problems. First the date parsing.", s.read("invoicer/dates.py"))
    s.do(None, s.read("tests/test_dates.py"))
    s.do(None, s.grep("parse_due_date", "."))
    s.do(
        "`parse_due_date` only knows DD/MM/YYYY, but the CLI docs and the new test use ISO dates. "
        "I'll accept both formats.",
        s.edit(
            "invoicer/dates.py",
            'def parse_due_date(text: str) -> date:\n    """Parse a due date as written on an invoice."""\n'
            "  text = text.strip()\n  return datetime.strptime(text, _FORMAT).date()",
            "def parse_due_date(text: str) -> date:\n"
            '    """Parse a due date as written on an invoice (ISO 8601 or DD/MM/YYYY)."""\n'
            "    text = text.strip()\n    for fmt in _FORMATS:\n        try:\n"
            "            return datetime.strptime(text, fmt).date()\n        except ValueError:\n"
            '            continue\n    raise ValueError(f"unrecognised due date: {text!r}")',
        ),
    )
    s.do("The indentation in my edit was off; re-reading the file.", s.read("invoicer/dates.py"))
    s.do(
        None,
        s.edit(
            "invoicer/dates.py",
            '_FORMAT = "%d/%m/%Y"\n\n\ndef parse_due_date(text: str) -> date:\n'
            '    """Parse a due date as written on an invoice."""\n    text = text.strip()\n'
            "    return datetime.strptime(text, _FORMAT).date()",
            '_FORMATS = ("%Y-%m-%d", "%d/%m/%Y")\n\n\ndef parse_due_date(text: str) -> date:\n'
            '    """Parse a due date as written on an invoice (ISO 8601 or DD/MM/YYYY)."""\n'
            "    text = text.strip()\n    for fmt in _FORMATS:\n        try:\n"
            "            return datetime.strptime(text, fmt).date()\n        except ValueError:\n"
            '            continue\n    raise ValueError(f"unrecognised due date: {text!r}")',
        ),
    )
    one_fail = _pytest(
        [("tests/test_dates.py", "......"), ("tests/test_totals.py", ".F..")],
        [("test_vat_total_is_rounded_to_cents", _VAT_FAIL)],
        [_SUMMARY_VAT],
        0.08,
    )
    s.do(None, s.run("python -m pytest -q", one_fail, 1))
    s.do("Dates pass now. On to the VAT rounding.", s.read("invoicer/totals.py"))
    s.do(None, s.read("invoicer/models.py"))
    s.do(None, s.read("tests/test_totals.py"))
    s.do(
        "VAT is summed from unrounded floats. I'll compute with Decimal and round each amount to cents "
        "with ROUND_HALF_UP, which is what invoices need.",
        s.edit(
            "invoicer/totals.py",
            "def line_net(item: LineItem) -> float:\n    return round(item.quantity * item.unit_price, 2)\n\n\n"
            "def net_total(invoice: Invoice) -> float:\n    return sum(line_net(item) for item in invoice.items)\n\n\n"
            "def vat_total(invoice: Invoice) -> float:\n"
            "    return sum(line_net(item) * item.vat_rate for item in invoice.items)\n\n\n"
            "def gross_total(invoice: Invoice) -> float:\n    return net_total(invoice) + vat_total(invoice)",
            'CENT = Decimal("0.01")\n\n\ndef _cents(value: Decimal) -> Decimal:\n'
            "    return value.quantize(CENT, rounding=ROUND_HALF_UP)\n\n\n"
            "def line_net(item: LineItem) -> Decimal:\n"
            "    return _cents(Decimal(item.quantity) * Decimal(str(item.unit_price)))\n\n\n"
            "def net_total(invoice: Invoice) -> float:\n"
            "    return float(sum((line_net(item) for item in invoice.items), Decimal(0)))\n\n\n"
            "def vat_total(invoice: Invoice) -> float:\n"
            "    vat = sum((line_net(item) * Decimal(str(item.vat_rate)) for item in invoice.items), Decimal(0))\n"
            "    return float(_cents(vat))\n\n\n"
            "def gross_total(invoice: Invoice) -> float:\n"
            "    return float(_cents(Decimal(str(net_total(invoice))) + Decimal(str(vat_total(invoice)))))",
        ),
    )
    name_error = _pytest(
        [("tests/test_totals.py", "FFFF")],
        [
            (
                "test_net_total",
                '    def test_net_total():\n        inv = make(LineItem("a", 2, 10.0), LineItem("b", 1, 5.5))\n'
                ">       assert net_total(inv) == 25.5\n\ntests/test_totals.py:14: \n"
                "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n"
                "invoicer/totals.py:17: in net_total\n"
                "    return float(sum((line_net(item) for item in invoice.items), Decimal(0)))\n"
                "E   NameError: name 'Decimal' is not defined",
            ),
        ]
        + [
            (t, f"    ...\nE   NameError: name 'Decimal' is not defined\n\ninvoicer/totals.py:{ln}: NameError")
            for t, ln in (
                ("test_vat_total_is_rounded_to_cents", 21),
                ("test_gross_total", 26),
                ("test_reduced_vat_rate", 21),
            )
        ],
        [
            f"FAILED tests/test_totals.py::{t} - NameError: name 'Decimal' is not defined"
            for t in (
                "test_net_total",
                "test_vat_total_is_rounded_to_cents",
                "test_gross_total",
                "test_reduced_vat_rate",
            )
        ],
        0.05,
    )
    s.do(None, s.run("python -m pytest -q tests/test_totals.py", name_error, 1))
    s.do(
        "Forgot the import.",
        s.edit(
            "invoicer/totals.py",
            "from invoicer.models import Invoice, LineItem",
            "from decimal import ROUND_HALF_UP, Decimal\n\nfrom invoicer.models import Invoice, LineItem",
        ),
    )
    s.do(
        None,
        s.run("python -m pytest -q tests/test_totals.py", _pytest([("tests/test_totals.py", "....")], [], [], 0.03)),
    )
    s.do(None, s.run("python -m pytest -q", _all_green(), 0))
    s.say(
        "Both failures are fixed:\n\n1. `parse_due_date` now accepts ISO 8601 (`2026-03-14`) as well as "
        "`DD/MM/YYYY`; it raises a clear `ValueError` for anything else.\n2. Totals are computed with "
        "`Decimal` and rounded half-up to cents, so `vat_total` of the test invoice is 0.27 instead of "
        "0.26599999999999996.\n\nAll 10 tests pass. The tests were right; I didn't change them."
    )


def _all_green(extra: int = 0) -> str:
    return _pytest([("tests/test_dates.py", "......"), ("tests/test_totals.py", "." * (4 + extra))], [], [], 0.07)


def _currency_turn(s: Session) -> None:
    s.user("Nice. Can you also make the CLI accept --currency? Default EUR. It should show up in the output.")
    s.do(None, s.read("invoicer/cli.py"))
    s.do(None, s.read("invoicer/models.py"))
    s.do(None, s.grep("currency", "."))
    s.do(
        "No currency anywhere yet. I'll add a `currency` field to `Invoice` and a `--currency` option.",
        s.edit(
            "invoicer/models.py",
            "    discount_percent: float = 0.0\n",
            '    discount_percent: float = 0.0\n    currency: str = "EUR"\n',
        ),
    )
    s.do(
        None,
        s.edit(
            "invoicer/cli.py",
            '    build.add_argument("--due", help="due date (default: 30 days after today)")\n',
            '    build.add_argument("--due", help="due date (default: 30 days after today)")\n'
            '    build.add_argument("--currency", default="EUR", help="ISO 4217 code (default: EUR)")\n',
        ),
    )
    s.do(
        None,
        s.edit(
            "invoicer/cli.py",
            "    invoice = Invoice(args.number, args.customer, today, due, read_items(args.items))\n"
            '    print(f"Invoice {invoice.number} for {invoice.customer}, due {due.isoformat()}")\n'
            '    print(f"  net   {net_total(invoice):>10.2f}")\n'
            '    print(f"  VAT   {vat_total(invoice):>10.2f}")\n'
            '    print(f"  gross {gross_total(invoice):>10.2f}")',
            "    invoice = Invoice(args.number, args.customer, today, due, read_items(args.items),\n"
            "                      currency=args.currency.upper())\n"
            "    cur = invoice.currency\n"
            '    print(f"Invoice {invoice.number} for {invoice.customer}, due {due.isoformat()}")\n'
            '    print(f"  net   {net_total(invoice):>10.2f} {cur}")\n'
            '    print(f"  VAT   {vat_total(invoice):>10.2f} {cur}")\n'
            '    print(f"  gross {gross_total(invoice):>10.2f} {cur}")',
        ),
    )
    s.do(None, s.run("python -m pytest -q", _all_green(), 0))
    s.do(
        None,
        s.run(
            "printf 'description,quantity,unit_price\\nWidget,3,19.99\\n' > /tmp/items.csv && "
            "python -m invoicer.cli build /tmp/items.csv --customer ACME --currency chf",
            "Invoice DRAFT for ACME, due 2026-12-22\n  net        59.97 CHF\n  VAT        11.39 CHF\n"
            "  gross      71.36 CHF",
        ),
    )
    s.say("Done: `--currency` (default EUR, upper-cased) is stored on the invoice and printed after each amount.")


def _ruff_turn(s: Session) -> None:
    s.user("Run the full test suite again and ruff please")
    s.do(None, s.run("python -m pytest -q", _all_green(), 0))
    ruff_fail = (
        "invoicer/cli.py:32:80: E501 Line too long (104 > 100)\n"
        "   |\n31 |     return [\n"
        '32 |         LineItem(row["description"], int(row["quantity"]), float(row["unit_price"]),\n'
        "   |                                                                                ^^^^ E501\n"
        '33 |                  float(row.get("vat_rate") or 0.19))\n   |\n\n'
        "invoicer/dates.py:5:33: F401 [*] `datetime.timedelta` imported but unused\n"
        "  |\n5 | from datetime import date, datetime, timedelta\n"
        "  |                                 ^^^^^^^^^ F401\n  |\n  = help: Remove unused import\n\n"
        "Found 2 errors.\n[*] 1 fixable with the `--fix` option."
    )
    s.do(None, s.run("ruff check .", ruff_fail, 1))
    s.do(None, s.read("invoicer/dates.py"))
    s.say(
        "The F401 is a false alarm in the sense that `timedelta` *is* used by `due_from_issue`... let me check again."
    )
    s.do(None, s.grep("timedelta", "invoicer"))
    s.do(None, s.run("ruff check .", ruff_fail, 1))
    s.do(None, s.run("ruff --version", "ruff 0.1.3", 0))
    s.do(
        "This ruff is very old (0.1.3) and mis-parses the file; the project pins nothing. Checking with the "
        "current release instead.",
        s.run("pipx run ruff==0.7.4 check .", ruff_fail.split("\n\ninvoicer/dates.py")[0] + "\n\nFound 1 error.", 1),
    )
    s.do(
        None,
        s.edit(
            "invoicer/cli.py",
            '        LineItem(row["description"], int(row["quantity"]), float(row["unit_price"]),\n'
            '                 float(row.get("vat_rate") or 0.19))',
            '        LineItem(\n            row["description"],\n            int(row["quantity"]),\n'
            '            float(row["unit_price"]),\n            float(row.get("vat_rate") or 0.19),\n        )',
        ),
    )
    s.do(None, s.run("pipx run ruff==0.7.4 check .", "All checks passed!", 0))
    s.do(None, s.run("python -m pytest -q", _all_green(), 0))
    s.say(
        "Tests: 10 passed. Ruff 0.7.4: all checks pass after wrapping one long line in `cli.py`. "
        "The `timedelta` warning came from the outdated ruff 0.1.3 on PATH; you may want to pin ruff "
        "in the dev dependencies."
    )


def _discount_turn(s: Session) -> None:
    s.user(
        "The totals are still wrong for invoices with a discount: 3 items at 19.99 with 10% discount "
        "should be 53.97 net, we print 59.97. The discount_percent field is just ignored."
    )
    s.do(None, s.read("invoicer/totals.py"))
    s.do(None, s.read("tests/test_totals.py"))
    s.do(None, s.grep("discount", "."))
    s.do(
        "Right, `discount_percent` is stored but never applied. I'll add a failing test first.",
        s.edit(
            "tests/test_totals.py",
            "def test_reduced_vat_rate():",
            "def test_discount_applies_to_net():\n"
            '    inv = make(LineItem("w", 3, 19.99), discount=10.0)\n'
            "    assert net_total(inv) == 53.97\n\n\n"
            "def test_reduced_vat_rate():",
        ),
    )
    disc_fail = _pytest(
        [("tests/test_totals.py", "....F")],
        [
            (
                "test_discount_applies_to_net",
                "    def test_discount_applies_to_net():\n"
                '        inv = make(LineItem("w", 3, 19.99), discount=10.0)\n'
                ">       assert net_total(inv) == 53.97\nE       assert 59.97 == 53.97\n"
                "E        +  where 59.97 = net_total(Invoice(number='T-1', customer='Test', "
                "issued=datetime.date(2026, 1, 1), due=datetime.date(2026, 2, 1), "
                "items=[LineItem(description='w', quantity=3, unit_price=19.99, vat_rate=0.19)], "
                "discount_percent=10.0, currency='EUR'))\n\ntests/test_totals.py:28: AssertionError",
            )
        ],
        ["FAILED tests/test_totals.py::test_discount_applies_to_net - assert 59.97 == 53.97"],
        0.04,
    )
    s.do(None, s.run("python -m pytest -q tests/test_totals.py", disc_fail, 1))
    s.do(
        None,
        s.edit(
            "invoicer/totals.py",
            "def net_total(invoice: Invoice) -> float:\n"
            "    return float(sum((line_net(item) for item in invoice.items), Decimal(0)))",
            "def _discount_factor(invoice: Invoice) -> Decimal:\n"
            "    return (Decimal(100) - Decimal(str(invoice.discount_percent))) / Decimal(100)\n\n\n"
            "def net_total(invoice: Invoice) -> float:\n"
            "    subtotal = sum((line_net(item) for item in invoice.items), Decimal(0))\n"
            "    return float(_cents(subtotal * _discount_factor(invoice)))",
        ),
    )
    s.do(
        None,
        s.run("python -m pytest -q tests/test_totals.py", _pytest([("tests/test_totals.py", ".....")], [], [], 0.03)),
    )
    s.do(
        "Net is right now, but VAT is still computed on the undiscounted lines. Checking the VAT function.",
        s.read("invoicer/totals.py"),
    )
    s.do(
        None,
        s.edit(
            "invoicer/totals.py",
            "    vat = sum((line_net(item) * Decimal(str(item.vat_rate)) for item in invoice.items), Decimal(0))\n"
            "    return float(_cents(vat))",
            "    factor = _discount_factor(invoice)\n"
            "    vat = sum(\n        (line_net(item) * factor * Decimal(str(item.vat_rate)) for item in invoice.items),\n"
            "        Decimal(0),\n    )\n    return float(_cents(vat))",
        ),
    )
    s.do(
        None,
        s.edit(
            "tests/test_totals.py",
            "def test_reduced_vat_rate():",
            "def test_discount_applies_to_vat():\n"
            '    inv = make(LineItem("w", 3, 19.99), discount=10.0)\n'
            "    assert vat_total(inv) == 10.25\n    assert gross_total(inv) == 64.22\n\n\n"
            "def test_reduced_vat_rate():",
        ),
    )
    s.do(None, s.run("python -m pytest -q", _all_green(2), 0))
    s.say(
        "Fixed: the discount is applied to the net subtotal and to the VAT base (rounded to cents once, "
        "after the discount). 3 × 19.99 with 10% off is now 53.97 net, 10.25 VAT, 64.22 gross. Two new "
        "tests cover it; all 12 pass."
    )


def _changelog_turn(s: Session) -> None:
    s.user("Great, please write a short CHANGELOG entry for all of this under 0.3.1")
    s.do(None, s.read("CHANGELOG.md"))
    s.do(
        None,
        s.edit(
            "CHANGELOG.md",
            "# Changelog\n\n## 0.3.0",
            "# Changelog\n\n## 0.3.1\n- Due dates accept ISO 8601 (`2026-03-14`) as well as `DD/MM/YYYY`.\n"
            "- Totals use Decimal with half-up rounding to cents.\n- Discounts are applied to net and VAT.\n"
            "- New `--currency` option (default EUR).\n\n## 0.3.0",
        ),
    )
    s.do(
        None,
        s.run(
            "git diff --stat",
            " CHANGELOG.md        |  6 ++++++\n invoicer/cli.py     | 16 ++++++++++------\n"
            " invoicer/dates.py   | 10 ++++++++--\n invoicer/models.py  |  1 +\n"
            " invoicer/totals.py  | 33 +++++++++++++++++++++++++--------\n"
            " tests/test_totals.py | 11 +++++++++++\n 6 files changed, 60 insertions(+), 17 deletions(-)",
        ),
    )
    s.say("Added a 0.3.1 section to CHANGELOG.md with the four changes.")


def _invalid_date_turn(s: Session) -> None:
    s.user("thanks! one more: what does parse_due_date do with '2026-02-30'?")
    s.do(None, s.read("invoicer/dates.py"))
    s.do(
        None,
        s.run(
            "python -c \"from invoicer.dates import parse_due_date; print(parse_due_date('2026-02-30'))\"",
            'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
            '  File "/home/dev/invoicer/invoicer/dates.py", line 19, in parse_due_date\n'
            '    raise ValueError(f"unrecognised due date: {text!r}")\n'
            "ValueError: unrecognised due date: '2026-02-30'",
            1,
        ),
    )
    s.say(
        "It raises `ValueError: unrecognised due date: '2026-02-30'`: both formats fail because February "
        "30th does not exist, so the message is a bit misleading (it *is* recognisable, just invalid)."
    )
    s.user("Let's make that raise our own InvalidDueDate error (subclass of ValueError) with a better message.")
    s.do(None, s.read("invoicer/dates.py"))
    s.do(
        None,
        s.edit(
            "invoicer/dates.py",
            "DEFAULT_TERMS_DAYS = 30\n",
            "DEFAULT_TERMS_DAYS = 30\n\n\nclass InvalidDueDate(ValueError):\n"
            '    """A due date that cannot be read or does not exist."""\n',
        ),
    )
    s.do(
        None,
        s.edit(
            "invoicer/dates.py",
            '    raise ValueError(f"unrecognised due date: {text!r}")',
            '    raise InvalidDueDate(\n        f"invalid due date {text!r}: expected an existing date as YYYY-MM-DD or DD/MM/YYYY"\n    )',
        ),
    )
    s.do(
        None,
        s.edit(
            "tests/test_dates.py",
            "def test_is_overdue():",
            'def test_impossible_date_rejected():\n    with pytest.raises(InvalidDueDate, match="2026-02-30"):\n'
            '        parse_due_date("2026-02-30")\n\n\ndef test_is_overdue():',
        ),
    )
    s.do(
        None,
        s.edit(
            "tests/test_dates.py",
            "from invoicer.dates import due_from_issue, format_date, is_overdue, parse_due_date",
            "from invoicer.dates import InvalidDueDate, due_from_issue, format_date, is_overdue, parse_due_date",
        ),
    )
    s.do(
        None,
        s.run(
            "python -m pytest -q",
            _pytest([("tests/test_dates.py", "......."), ("tests/test_totals.py", "......")], [], [], 0.07),
            0,
        ),
    )
    s.do(None, s.run("pipx run ruff==0.7.4 check .", "All checks passed!", 0))
    s.say(
        "`parse_due_date('2026-02-30')` now raises `InvalidDueDate` (a `ValueError`) with the expected formats "
        "in the message. New test added; 13 tests pass and ruff is clean."
    )


def build() -> Session:
    s = Session("invoicer", "openai", ROOT, FILES)
    s.system(
        "You are a coding agent working in the repository at /home/dev/invoicer. Use the tools to read, "
        "search and edit files and to run commands. Keep changes minimal, run the tests after each change, "
        "and explain what you did at the end of each task."
    )
    _first_turn(s)
    _currency_turn(s)
    _ruff_turn(s)
    _discount_turn(s)
    _changelog_turn(s)
    _invalid_date_turn(s)
    return s
