"""The system context (R57): typed sources, each with an epoch; only moved epochs re-render.

A :class:`ContextSource` has a ``render()`` that produces its section text and an ``epoch()``
that is cheap to compute and moves whenever that text could change (a change counter, a
revision, file stats, a hash of the inputs). :meth:`SystemContext.build` asks every source for
its epoch, renders only the sources whose epoch moved since the last build, and joins the
sections in the order the sources were added. With no epoch moved the text is the same string,
byte for byte, so a provider's prompt cache stays warm.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tiermem.errors import InvalidInput, NotFound

log = logging.getLogger(__name__)

SOURCE_KINDS: tuple[str, ...] = ("memory", "plan", "daily", "custom")
SEPARATOR = "\n\n"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


@dataclass(frozen=True)
class ContextSource:
    """One typed section of the system context.

    ``render`` returns the section text ("" leaves the section out); ``epoch`` returns any
    value comparable with ``==`` that moves when the rendered text could change.
    """

    name: str
    kind: str
    render: Callable[[], str]
    epoch: Callable[[], object]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise InvalidInput(f"source name {self.name!r} must be 1-64 letters, digits, '_', '.', ':', '-'")
        if self.kind not in SOURCE_KINDS:
            raise InvalidInput(f"source kind {self.kind!r} is not one of {', '.join(SOURCE_KINDS)}")
        if not callable(self.render) or not callable(self.epoch):
            raise InvalidInput(f"source {self.name!r} needs callable render and epoch")


@dataclass(frozen=True)
class SystemContextResult:
    """One build: the assembled ``text`` and what moved since the previous build.

    ``changed``: sources whose section text differs from the previous build (on the first build,
    every source); ``rerendered``: sources whose epoch moved and were rendered again (a source can
    re-render to the same text). ``changed`` is empty exactly when ``text`` did not change.
    """

    text: str
    changed: list[str]
    rerendered: list[str]
    sections: dict[str, str] = field(default_factory=dict)
    epochs: dict[str, object] = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        return not self.changed


@dataclass(frozen=True)
class _Rendered:
    epoch: object
    text: str


class SystemContext:
    """An ordered set of sources and the last rendering of each. Thread-safe."""

    def __init__(self, sources: Iterable[ContextSource] = (), separator: str = SEPARATOR) -> None:
        self._sources: dict[str, ContextSource] = {}
        self._cache: dict[str, _Rendered] = {}
        self._last_sections: dict[str, str] | None = None
        self._last_text = ""
        self._separator = separator
        self._lock = threading.Lock()
        for source in sources:
            self.add(source)

    # --- sources ---------------------------------------------------------------------------
    def add(self, source: ContextSource) -> None:
        """Append a source (its section comes after the ones already added)."""
        if not isinstance(source, ContextSource):
            raise InvalidInput(f"expected a ContextSource, got {type(source).__name__}")
        with self._lock:
            if source.name in self._sources:
                raise InvalidInput(f"a source named {source.name!r} exists already")
            self._sources[source.name] = source

    def add_source(self, name: str, render: Callable[[], str], epoch: Callable[[], object],
                   kind: str = "custom") -> None:
        """Append a custom source: ``render() -> str`` and a cheap ``epoch() -> comparable``."""
        self.add(ContextSource(name, kind, render, epoch))

    def remove_source(self, name: str) -> None:
        with self._lock:
            if name not in self._sources:
                raise NotFound(f"no system-context source {name!r}")
            del self._sources[name]
            self._cache.pop(name, None)

    @property
    def names(self) -> list[str]:
        with self._lock:
            return list(self._sources)

    def invalidate(self, name: str | None = None) -> None:
        """Forget the rendering of ``name`` (or of every source): it re-renders on the next build."""
        with self._lock:
            if name is None:
                self._cache.clear()
            elif name in self._sources:
                self._cache.pop(name, None)
            else:
                raise NotFound(f"no system-context source {name!r}")

    # --- build -----------------------------------------------------------------------------
    def build(self) -> SystemContextResult:
        """Assemble the text; a failing source raises and leaves the previous state untouched."""
        with self._lock:
            cache: dict[str, _Rendered] = {}
            rerendered: list[str] = []
            for name, source in self._sources.items():
                epoch = source.epoch()
                old = self._cache.get(name)
                if old is not None and _same(old.epoch, epoch):
                    cache[name] = old
                    continue
                cache[name] = _Rendered(epoch, _render(source))
                rerendered.append(name)
            sections = {name: entry.text for name, entry in cache.items()}
            changed = self._changed(sections)
            text = self._separator.join(t for t in sections.values() if t)
            if text == self._last_text:
                text = self._last_text
            self._cache, self._last_sections, self._last_text = cache, sections, text
            if rerendered:
                log.debug("system context: re-rendered %s; changed %s", rerendered, changed)
            return SystemContextResult(text, changed, rerendered, dict(sections),
                                       {name: entry.epoch for name, entry in cache.items()})

    def _changed(self, sections: dict[str, str]) -> list[str]:
        previous = self._last_sections
        if previous is None:
            return list(sections)
        changed = [name for name, text in sections.items() if previous.get(name) != text]
        changed += [name for name, text in previous.items() if name not in sections and text]
        return changed


def _same(old: object, new: object) -> bool:
    try:
        return bool(old == new)
    except Exception:  # an epoch that cannot compare (e.g. an array): treat as moved
        return False


def _render(source: ContextSource) -> str:
    text: Any = source.render()
    if not isinstance(text, str):
        raise InvalidInput(f"source {source.name!r} rendered {type(text).__name__}, not text")
    return text.strip()
