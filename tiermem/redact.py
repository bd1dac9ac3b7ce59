"""Secret redaction (R68): API keys, tokens, private keys and passwords become
``[REDACTED:<kind>]`` before text is persisted or sent to an extraction model.

Patterns are deliberately specific (known key prefixes with a minimum length, PEM armour,
``password=``-style assignments) so that ordinary prose is left alone. Redacting twice gives
the same text as redacting once.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...]  # lower-case substrings; the regex runs only if one is present
    keep_prefix: bool = False  # keep group 1 (``Bearer ``, ``password=``), replace the rest


_HAS_DIGIT = r"(?=[A-Za-z0-9_\-]*\d)"
_VALUE = r"(?!\[REDACTED)(\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"']+)"
_RULES: tuple[_Rule, ...] = (
    _Rule("private_key", re.compile(
        r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----"
        r"(?:.*?-----END \1PRIVATE KEY\2-----"  # a whole block, or one cut off: its base64 lines
        r"|(?:[ \t]*\r?\n(?:[A-Za-z0-9+/=]{4,}|[A-Za-z\-]+: [^\n]*)[ \t]*(?=\r?\n|$))*)", re.DOTALL),
        ("private key",)),
    _Rule("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"), ("sk-ant-",)),
    _Rule("openai_key", re.compile(rf"\bsk-(?:proj-|svcacct-|admin-)?{_HAS_DIGIT}[A-Za-z0-9_\-]{{20,}}"),
          ("sk-",)),
    _Rule("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), ("_live_", "_test_")),
    _Rule("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ("akia", "asia")),
    _Rule("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
          ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _Rule("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), ("xox",)),
    _Rule("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), ("aiza",)),
    _Rule("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), ("eyj",)),
    _Rule("bearer_token", re.compile(r"(?i)(\bbearer\s+)(?!\[REDACTED)[A-Za-z0-9._~+/\-]{16,}=*"),
          ("bearer",), keep_prefix=True),
    _Rule("basic_auth", re.compile(r"(?i)(\bauthorization:\s*basic\s+)(?!\[REDACTED)[A-Za-z0-9+/]{8,}=*"),
          ("basic",), keep_prefix=True),
    _Rule("password", re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^\s:/@\[]+:)(?!\[REDACTED)[^\s@/]+(?=@)"),
          ("://",), keep_prefix=True),  # the password in scheme://user:password@host
    _Rule("password", re.compile(
        r"(?i)((?<![a-z])(?:password|passwd|pwd|passphrase)(?![a-z])[\"']?\s*[:=]\s*)" + _VALUE),
        ("pass", "pwd"), keep_prefix=True),
    _Rule("secret", re.compile(
        r"(?i)((?<![a-z])(?:api[_\-]?key|apikey|secret|secret[_\-]?key|client[_\-]?secret|access[_\-]?token|"
        r"auth[_\-]?token|refresh[_\-]?token|private[_\-]?key|aws_secret_access_key)(?![a-z])[\"']?\s*[:=]\s*)"
        + _VALUE), ("key", "secret", "token"), keep_prefix=True),
)


def redact_counted(text: str) -> tuple[str, Counter[str]]:
    """Redact ``text``; also return how many secrets of each kind were replaced."""
    counts: Counter[str] = Counter()
    lowered = text.lower()  # triggers present in the original; our markers never need redacting
    for rule in _RULES:
        if not any(trigger in lowered for trigger in rule.triggers):
            continue

        def substitute(match: re.Match[str], rule: _Rule = rule) -> str:
            counts[rule.kind] += 1
            return (match.group(1) if rule.keep_prefix else "") + f"[REDACTED:{rule.kind}]"

        text = rule.pattern.sub(substitute, text)
    return text, counts


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``."""
    return redact_counted(text)[0]
