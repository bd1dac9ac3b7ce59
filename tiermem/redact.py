"""Secret redaction (R68): API keys, tokens, private keys and passwords become
``[REDACTED:<kind>]`` before text is persisted or sent to an extraction model.

Patterns are deliberately specific (known key prefixes with a minimum length, PEM armour and
base64 key bodies, ``password=``/``token:``-style assignments) so that ordinary prose is left
alone. Redacting twice gives the same text as redacting once. A quoted value keeps its quotes
(``"token": "[REDACTED:token]"``), so JSON stays JSON.

Whole texts are redacted, never line by line: a private key's body is only recognisable next
to its armour or as a run of long base64 lines.

:class:`Redactor` is the choke point of a store: every write helper of the storage layer and
every file writer calls it (``redact_secrets = false`` turns it off), so a secret never reaches
SQLite or the Markdown files whichever public path it came by. Identifiers (thread ids, session
ids) go through :func:`redact_id`, which keeps different ids apart with a short hash.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

_T = TypeVar("_T")


class _LazyPattern:
    """A regular expression compiled on its first use: most texts trigger no rule, and compiling
    them all cost every process that imports this module (every hook that opens a store) 15 ms."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:  # two threads may both compile it: the same pattern either way
            self._compiled = re.compile(*self._args)
        return self._compiled

    def sub(self, repl: Callable[[re.Match[str]], str], text: str) -> str:
        return self.compiled.sub(repl, text)

    def search(self, text: str) -> re.Match[str] | None:
        return self.compiled.search(text)


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: _LazyPattern
    triggers: tuple[str, ...]  # lower-case substrings; the regex runs only if one is present ("" = always)
    keep_prefix: bool = False  # keep group 1 (``Bearer ``, ``password=``), replace the rest


_HAS_DIGIT = r"(?=[A-Za-z0-9_\-]*\d)"
_NOT_DONE = r"(?![\"']?\[REDACTED)"  # a value that is already a marker (idempotence)
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
_VALUE = _NOT_DONE + rf"({_QUOTED}|[^\s,;&\"']+)"
# a value that looks like a credential (8+ characters with a digit): ``token`` is also an English word
_CREDENTIAL = _NOT_DONE + r"(?=[\"']?[^\s,;&\"']{8})(?=[\"']?[^\s,;&\"']*\d)" + rf"({_QUOTED}|[^\s,;&\"']+)"
_NAME_START = r"(?<![A-Za-z0-9_\-.])(?:[A-Za-z0-9]+[_\-.])*"  # ``DB_``, ``x-``, ``slack.bot.`` before a name
_ASSIGN = r"(?![a-z])[\"']?\s*[:=]\s*"
_NL = r"[ \t]*(?:\r?\n|\\n)[ \t]*(?:[-*+>][ \t]+)?"  # a line break (or a JSON ``\n``), indentation, a bullet
_B64_LINE = r"(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[a-z])[A-Za-z0-9+/]{60,80}={0,2}"  # mixed case: not hex
_B64_LAST = r"(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{1,59}={0,2}"  # a short last line (with a digit, / or =)
_ARMOUR = r"-----(?:BEGIN|END) (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_AWS_SECRET = r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"

_RULES: tuple[_Rule, ...] = (
    _Rule("private_key", _LazyPattern(  # a whole armoured block, or one cut off after its header: its base64 lines
        r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----"
        r"(?:.*?-----END \1PRIVATE KEY\2-----"
        rf"|(?:{_NL}(?:[A-Za-z0-9+/=]{{4,}}|[A-Za-z\-]+: [^\n]*)[ \t]*(?=\r?\n|\\n|\"|$))*)", re.DOTALL),
        ("private key",)),
    _Rule("private_key", _LazyPattern(  # the tail of a block whose header is elsewhere (a cut text, a chunk)
        rf"(?m)(^[ \t]*(?:[-*+>][ \t]+)?)(?:[A-Za-z0-9+/=]{{4,}}{_NL})+{_ARMOUR}"), ("private key",),
        keep_prefix=True),
    _Rule("private_key", _LazyPattern(_ARMOUR), ("private key",)),
    _Rule("private_key", _LazyPattern(  # a key body without armour: two or more long base64 lines
        rf"(?:(?<![A-Za-z0-9+/=])|(?<=\\n)){_B64_LINE}(?:{_NL}{_B64_LINE})+"
        rf"(?:{_NL}{_B64_LAST})?(?![A-Za-z0-9+/=])"), ("",)),
    _Rule("anthropic_key", _LazyPattern(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"), ("sk-ant-",)),
    _Rule("openai_key", _LazyPattern(rf"\bsk-(?:proj-|svcacct-|admin-)?{_HAS_DIGIT}[A-Za-z0-9_\-]{{20,}}"),
          ("sk-",)),
    _Rule("stripe_key", _LazyPattern(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), ("_live_", "_test_")),
    _Rule("aws_secret_key", _LazyPattern(  # AWS_SECRET_ACCESS_KEY=..., "SecretAccessKey": "...", aws secret key ...
        r"(?i)((?<![a-z])(?:aws[_\-.\s]?)?secret[_\-.\s]?(?:access[_\-.\s]?)?key(?:[_\-.\s]?id)?(?![a-z])"
        r"[\"']?\s*[:=]?\s*[\"']?)" + r"(?-i:" + _AWS_SECRET + ")"), ("secret",), keep_prefix=True),
    _Rule("aws_secret_key", _LazyPattern(  # next to its access key id: "AKIA..., wJalr..." (CSV, config lines)
        rf"(\b(?:AKIA|ASIA)[0-9A-Z]{{16}}\b[^\n]{{0,100}}?){_AWS_SECRET}"), ("akia", "asia"), keep_prefix=True),
    _Rule("aws_access_key", _LazyPattern(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ("akia", "asia")),
    _Rule("github_token", _LazyPattern(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
          ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _Rule("slack_token", _LazyPattern(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), ("xox",)),
    _Rule("google_api_key", _LazyPattern(r"\bAIza[0-9A-Za-z_\-]{35}"), ("aiza",)),
    _Rule("jwt", _LazyPattern(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), ("eyj",)),
    _Rule("bearer_token", _LazyPattern(r"(?i)(\bbearer\s+)(?!\[REDACTED)[A-Za-z0-9._~+/\-]{16,}=*"),
          ("bearer",), keep_prefix=True),
    _Rule("basic_auth", _LazyPattern(r"(?i)(\bauthorization:\s*basic\s+)(?!\[REDACTED)[A-Za-z0-9+/]{8,}=*"),
          ("basic",), keep_prefix=True),
    _Rule("password", _LazyPattern(r"(\b[a-z][a-z0-9+.\-]*://[^\s:/@\[]+:)(?!\[REDACTED)[^\s@/]+(?=@)"),
          ("://",), keep_prefix=True),  # the password in scheme://user:password@host
    _Rule("password", _LazyPattern(
        r"(?i)((?<![a-z])(?:[a-z]*password|passwd|pwd|passphrase)" + _ASSIGN + ")" + _VALUE),
        ("pass", "pwd"), keep_prefix=True),
    _Rule("secret", _LazyPattern(
        r"(?i)(" + _NAME_START + r"(?:api[_\-]?key|apikey|secret|secret[_\-]?key|client[_\-]?secret|"
        r"access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|private[_\-]?key|aws_secret_access_key)"
        + _ASSIGN + ")" + _VALUE), ("key", "secret", "token"), keep_prefix=True),
    _Rule("token", _LazyPattern(  # token: ..., api_token=..., SLACK_BOT_TOKEN=..., "x-auth-token": "..."
        r"(?i)(" + _NAME_START + r"token" + _ASSIGN + ")" + _CREDENTIAL), ("token",), keep_prefix=True),
)
_TRIGGERS = tuple(sorted({trigger for rule in _RULES for trigger in rule.triggers if trigger}))
_LONG_RUN = _LazyPattern(r"[A-Za-z0-9+/]{60}")  # a quick scan before the key-body rule
_MIN_BODY_CHARS = 121  # two base64 lines of 60 characters and a line break: shorter texts hold no key body
_MAX_ID_CHARS = 256  # validate.thread_id's limit: a redacted id longer than this becomes a fixed-length one

Marker = Callable[[str, str], str]  # (kind, the secret) -> its replacement


def _plain_marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}]"


def _hashed_marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}~{_short_hash(secret)}]"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _apply(text: str, marker: Marker, counts: Counter[str] | None = None) -> str:
    lowered = text.lower()  # triggers present in the original; our markers never need redacting
    present = {trigger for trigger in _TRIGGERS if trigger in lowered}
    if not present and len(text) < _MIN_BODY_CHARS:
        return text  # most texts: no rule can match
    for rule in _RULES:
        if rule.triggers == ("",):
            if len(text) < _MIN_BODY_CHARS or not _LONG_RUN.search(text):
                continue
        elif present.isdisjoint(rule.triggers):
            continue

        def substitute(match: re.Match[str], rule: _Rule = rule) -> str:
            if counts is not None:
                counts[rule.kind] += 1
            prefix = match.group(1) if rule.keep_prefix else ""
            secret = match.group(0)[len(prefix):]
            quote = secret[0] if len(secret) > 1 and secret[0] in "\"'" and secret[-1] == secret[0] else ""
            return prefix + quote + marker(rule.kind, secret) + quote

        text = rule.pattern.sub(substitute, text)
    return text


def redact_counted(text: str) -> tuple[str, Counter[str]]:
    """Redact ``text``; also return how many secrets of each kind were replaced."""
    counts: Counter[str] = Counter()
    return _apply(text, _plain_marker, counts), counts


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``."""
    return _apply(text, _plain_marker)


def redact_id(value: str) -> str:
    """An identifier (thread id, session id) with each secret replaced by
    ``[REDACTED:<kind>~<12 hex of its SHA-256>]``: two ids that differ only in their secret stay
    two ids, the same id always maps to the same text (in every process), and redacting a part
    of an id gives the same text as that part of the redacted id. Ids without secrets are kept."""
    redacted = _apply(value, _hashed_marker)
    if redacted != value and len(redacted) > _MAX_ID_CHARS >= len(value):
        return f"[REDACTED:id~{_short_hash(value)}]"
    return redacted


def redact_data(value: _T) -> _T:
    """A JSON-like value (a message with its tool calls and tool inputs, a queued thread) redacted
    whole, as :func:`redact_tree` does: every string, a value that only its key gives away
    (``{"api_key": "..."}`` in a tool input) and JSON inside strings; dict keys are kept and a
    string that is JSON itself stays valid JSON."""
    return redact_tree(value)


def redact_json(text: str, clean: Callable[[str], str] = redact) -> str:
    """The JSON text of a stored object (a LangGraph store value, an agent SDK session item) with
    its string leaves redacted (keys kept), each also as the pair ``"key": "value"`` reads in a JSON
    text, so ``{"api_key": "..."}`` loses its value as it would in a message. Nothing to redact gives
    back ``text`` itself: a value without secrets keeps its exact text (key order, number spelling)."""
    value = json.loads(text)
    cleaned = _walk_named(value, clean)
    return text if cleaned == value else json.dumps(cleaned, ensure_ascii=False)


def _walk_named(value: Any, clean: Callable[[str], str]) -> Any:
    if isinstance(value, dict):
        return {key: _named(key, item, clean) if isinstance(item, str) else _walk_named(item, clean)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_walk_named(item, clean) for item in value]
    return clean(value) if isinstance(value, str) else value


def _named(key: str, text: str, clean: Callable[[str], str]) -> str:
    text = clean(text)
    lowered = key.lower()
    if not any(trigger in lowered for trigger in _TRIGGERS):
        return text  # a name that no rule reads (most keys): the pair holds nothing more than the text
    pair = json.dumps({key: text}, ensure_ascii=False)
    cleaned = clean(pair)
    if cleaned == pair:
        return text
    try:
        found = json.loads(cleaned)  # a quoted value keeps its quotes: still one JSON object
    except ValueError:
        return text  # a match across the key and the value (hostile keys): the leaf alone, redacted
    values = list(found.values()) if isinstance(found, dict) else []
    return values[0] if len(values) == 1 and isinstance(values[0], str) else text


def redact_tree(value: _T, clean: Callable[[str], str] = redact) -> _T:
    """A JSON-like value (a chat message with its tool calls) redacted whole: every string leaf, also
    as the pair ``"key": "value"`` (as :func:`redact_json` reads a stored object), and a string that
    is JSON itself (tool-call arguments, JSON inside those) walked the same way inside, so it stays
    JSON. Dict keys are kept; a string without secrets keeps its exact text."""
    return _walk_tree(value, clean)  # type: ignore[no-any-return]


def _walk_tree(value: Any, clean: Callable[[str], str]) -> Any:
    if isinstance(value, dict):
        return {key: _named(key, _tree_text(item, clean), clean) if isinstance(item, str) and isinstance(key, str)
                else _walk_tree(item, clean) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk_tree(item, clean) for item in value]
    return _tree_text(value, clean) if isinstance(value, str) else value


def _tree_text(text: str, clean: Callable[[str], str]) -> str:
    """``text`` redacted; when it is a JSON object or array, its own leaves first (a secret inside an
    escaped string is out of reach of the patterns)."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            value = json.loads(text)
            cleaned = _walk_tree(value, clean)
        except (ValueError, RecursionError):
            pass  # not JSON (or nested past any sense): redacted as plain text
        else:
            text = text if cleaned == value else json.dumps(cleaned, ensure_ascii=False)
    return clean(text)


@dataclass(frozen=True)
class Redactor:
    """The redaction of one store: on unless the ``redact_secrets`` setting is false. Storage
    write helpers and file writers pass every text a person, an agent or a model wrote through
    it; ``enabled=False`` hands everything back unchanged."""

    enabled: bool = True

    def text(self, value: str) -> str:
        return redact(value) if self.enabled else value

    def optional(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)

    def ident(self, value: str) -> str:
        """An identifier: see :func:`redact_id`."""
        return redact_id(value) if self.enabled else value

    def optional_ident(self, value: str | None) -> str | None:
        return None if value is None else self.ident(value)

    def data(self, value: _T) -> _T:
        """A JSON-like value: see :func:`redact_data`."""
        return redact_data(value) if self.enabled else value

    def tree(self, value: _T) -> _T:
        """A JSON-like value redacted whole, JSON inside its strings too: see :func:`redact_tree`."""
        return redact_tree(value) if self.enabled else value

    def json_text(self, text: str) -> str:
        """The JSON text of a stored object: see :func:`redact_json`."""
        return redact_json(text) if self.enabled else text

    @property
    def scrub(self) -> Callable[[str], str] | None:
        """The plain function (``None`` when off), for code that takes an optional scrubber."""
        return redact if self.enabled else None


REDACT = Redactor(True)
KEEP = Redactor(False)
