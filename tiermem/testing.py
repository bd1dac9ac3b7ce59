"""Test doubles for the three seams, shipped for users' own tests.

- :class:`ScriptedChatModel` returns canned replies in order and records every request.
- :class:`HashEmbedder` is a deterministic word-hashing embedder (no model, no network).
- :class:`FakeClock` is a clock you move by hand.
"""

from __future__ import annotations

import copy
import hashlib
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["ScriptedChatModel", "ScriptedRequest", "HashEmbedder", "FakeClock"]


@dataclass(frozen=True)
class ScriptedRequest:
    """One call a :class:`ScriptedChatModel` received."""

    messages: list[dict[str, Any]]
    json_schema: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """All message contents joined, for easy ``in`` assertions."""
        return "\n".join(str(m.get("content", "")) for m in self.messages)


@dataclass
class ScriptedChatModel:
    """A chat model that replays ``replies`` in order.

    A reply that is an exception (instance or class) is raised instead of returned. A call
    beyond the script raises ``AssertionError``; ``remaining`` lists the unused replies.
    """

    replies: list[str | BaseException | type[BaseException]]
    requests: list[ScriptedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.replies = list(self.replies)

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        with self._lock:
            self.requests.append(ScriptedRequest(copy.deepcopy(list(messages)), json_schema))
            if not self.replies:
                raise AssertionError(
                    f"ScriptedChatModel got call #{len(self.requests)} but has no replies left"
                )
            reply = self.replies.pop(0)
        if isinstance(reply, BaseException) or (isinstance(reply, type) and issubclass(reply, BaseException)):
            raise reply
        return reply

    @property
    def remaining(self) -> list[str | BaseException | type[BaseException]]:
        return list(self.replies)


_WORD_RE = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Deterministic bag-of-words embedder: each (lower-cased, crudely stemmed) word hashes to a
    signed bucket. Texts that share words get similar vectors, so a query about "bees" ranks a
    fact about bees first. Not a semantic model: for tests and offline demos only."""

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ValueError("dim must be at least 8")
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return f"hash-{self._dim}"

    @staticmethod
    def _stem(word: str) -> str:
        for suffix in ("ing", "es", "s"):
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                return word[: -len(suffix)]
        return word

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD_RE.findall(text.casefold()):
                digest = hashlib.blake2b(self._stem(word).encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self._dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out


class FakeClock:
    """A clock that only moves when told to. ``start`` must be an aware datetime."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime (with tzinfo)")
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now = self._now + timedelta(seconds=seconds)
            return self._now

    def sleep(self, seconds: float) -> None:
        """Code that pauses through its clock (the update queue) moves fake time instead of waiting."""
        self.advance(seconds)

    def set(self, moment: datetime) -> None:
        if moment.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime (with tzinfo)")
        with self._lock:
            self._now = moment
