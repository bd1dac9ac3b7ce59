"""Importing ``tiermem.redact`` compiles none of its rules (issue 23, P8): every process that opens
a store imports it, most texts trigger no rule, and compiling all 20 took 15 ms of each hook."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
from tiermem import redact
rules = [rule.pattern for rule in redact._RULES]
print(sum(pattern._compiled is not None for pattern in rules))
print(redact.redact("my key is sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"))
print(sum(pattern._compiled is not None for pattern in rules))
"""


def test_rules_are_compiled_when_a_text_needs_them() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True)
    before, redacted, after = done.stdout.splitlines()
    assert before == "0"
    assert redacted == "my key is [REDACTED:anthropic_key]"
    assert after == "3"  # the rules its triggers name: "sk-ant-", "sk-" and "key" (of 20)
