"""Transcript 2 (Anthropic shape): adding a response cache to a small HTTP client library."""

# Tool outputs below are reproduced verbatim (long lines, trailing spaces as pytest prints them).
# ruff: noqa: E501, W291, W293

from __future__ import annotations

from transcript_kit import Session, pytest_output

ROOT = "/Users/mara/src/fetchkit"

FILES = {
    "pyproject.toml": """[project]
name = "fetchkit"
version = "1.4.2"
requires-python = ">=3.10"
dependencies = ["httpx>=0.27"]

[project.optional-dependencies]
dev = ["pytest>=8", "mypy>=1.10", "respx>=0.21", "ruff>=0.6"]

[tool.mypy]
strict = true
packages = ["fetchkit"]
""",
    "fetchkit/__init__.py": """from fetchkit.client import Client, Response
from fetchkit.errors import FetchError, HTTPStatusError

__all__ = ["Client", "Response", "FetchError", "HTTPStatusError"]
""",
    "fetchkit/errors.py": '''class FetchError(Exception):
    """Base class for fetchkit errors."""


class HTTPStatusError(FetchError):
    def __init__(self, status: int, url: str, body: str = "") -> None:
        super().__init__(f"HTTP {status} for {url}")
        self.status = status
        self.url = url
        self.body = body


class RetryExhausted(FetchError):
    pass
''',
    "fetchkit/client.py": '''"""A small synchronous HTTP client with retries, built on httpx."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import httpx

from fetchkit.errors import HTTPStatusError, RetryExhausted

RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str
    elapsed: float = 0.0

    def json(self) -> Any:
        import json

        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


@dataclass
class Client:
    base_url: str = ""
    timeout: float = 10.0
    retries: int = 2
    backoff: float = 0.5
    headers: dict[str, str] = field(default_factory=dict)
    _http: httpx.Client | None = field(default=None, repr=False)

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(base_url=self.base_url, timeout=self.timeout, headers=self.headers)
        return self._http

    def request(self, method: str, url: str, **kwargs: Any) -> Response:
        last_error: Exception | None = None
        for attempt in range(self.retries + 1):
            started = time.monotonic()
            try:
                raw = self._client().request(method, url, **kwargs)
            except httpx.TransportError as exc:
                last_error = exc
            else:
                if raw.status_code not in RETRY_STATUSES:
                    response = Response(raw.status_code, dict(raw.headers), raw.content, str(raw.url),
                                        time.monotonic() - started)
                    if response.status >= 400:
                        raise HTTPStatusError(response.status, response.url, response.text[:500])
                    return response
                last_error = HTTPStatusError(raw.status_code, str(raw.url))
            if attempt < self.retries:
                time.sleep(self.backoff * (2**attempt))
        raise RetryExhausted(f"{method} {url} failed after {self.retries + 1} attempts") from last_error

    def get(self, url: str, **kwargs: Any) -> Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> Response:
        return self.request("POST", url, **kwargs)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
''',
    "tests/test_client.py": """import httpx
import pytest
import respx

from fetchkit import Client, HTTPStatusError
from fetchkit.errors import RetryExhausted


@respx.mock
def test_get_returns_body():
    respx.get("https://api.test/items").mock(return_value=httpx.Response(200, json=[1, 2]))
    with Client(base_url="https://api.test") as client:
        assert client.get("/items").json() == [1, 2]


@respx.mock
def test_4xx_raises_without_retry():
    route = respx.get("https://api.test/missing").mock(return_value=httpx.Response(404, text="nope"))
    with Client(base_url="https://api.test", backoff=0) as client, pytest.raises(HTTPStatusError):
        client.get("/missing")
    assert route.call_count == 1


@respx.mock
def test_503_is_retried_then_gives_up():
    route = respx.get("https://api.test/busy").mock(return_value=httpx.Response(503))
    with Client(base_url="https://api.test", retries=2, backoff=0) as client, pytest.raises(RetryExhausted):
        client.get("/busy")
    assert route.call_count == 3


@respx.mock
def test_each_get_hits_the_network():
    route = respx.get("https://api.test/items").mock(return_value=httpx.Response(200, json=[]))
    with Client(base_url="https://api.test") as client:
        client.get("/items")
        client.get("/items")
    assert route.call_count == 2
""",
}

CACHE_V1 = '''"""In-memory cache for GET responses, honouring Cache-Control max-age."""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from typing import Callable

from fetchkit.client import Response

_MAX_AGE = re.compile(r"max-age=(\\d+)")


class ResponseCache:
    def __init__(self, max_entries: int = 256, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, Response]] = OrderedDict()

    def get(self, url: str) -> Response | None:
        item = self._entries.get(url)
        if item is None:
            return None
        expires, response = item
        if self._clock() >= expires:
            del self._entries[url]
            return None
        self._entries.move_to_end(url)
        return response

    def put(self, url: str, response: Response) -> None:
        control = response.headers.get("cache-control", "")
        match = _MAX_AGE.search(control)
        if not match:
            return
        self._entries[url] = (self._clock() + int(match.group(1)), response)
        self._entries.move_to_end(url)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
'''

TEST_CACHE = """import httpx
import respx

from fetchkit import Client
from fetchkit.cache import ResponseCache


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@respx.mock
def test_max_age_is_honoured():
    clock = FakeClock()
    route = respx.get("https://api.test/cfg").mock(
        return_value=httpx.Response(200, json={"v": 1}, headers={"Cache-Control": "max-age=60"})
    )
    with Client(base_url="https://api.test", cache=ResponseCache(clock=clock)) as client:
        client.get("/cfg")
        client.get("/cfg")
        assert route.call_count == 1
        clock.now += 61
        client.get("/cfg")
        assert route.call_count == 2


@respx.mock
def test_without_max_age_nothing_is_cached():
    route = respx.get("https://api.test/live").mock(return_value=httpx.Response(200, json={}))
    with Client(base_url="https://api.test", cache=ResponseCache()) as client:
        client.get("/live")
        client.get("/live")
    assert route.call_count == 2
"""


def _pytest(rows: list[tuple[str, str]], failures: list[tuple[str, str]], summary: list[str], secs: float) -> str:
    return pytest_output(ROOT, rows, failures, summary, secs, "darwin -- Python 3.12.7, pytest-8.3.3, pluggy-1.5.0")


def _green(cache_tests: str = "") -> str:
    rows = [("tests/test_cache.py", cache_tests)] if cache_tests else []
    return _pytest(rows + [("tests/test_client.py", "....")], [], [], 0.31)


def _mypy(errors: list[str]) -> str:
    if not errors:
        return "Success: no issues found in 4 source files"
    return (
        "\n".join(errors)
        + f"\nFound {len(errors)} error{'s' if len(errors) > 1 else ''} in 2 files (checked 4 source files)"
    )


_PUT_UNTYPED = "    def put(self, url, response):\n"
_PUT_TYPED = "    def put(self, url: str, response: Response) -> None:\n"
_GET_OLD = '    def get(self, url: str, **kwargs: Any) -> Response:\n        return self.request("GET", url, **kwargs)'
_GET_NEW = (
    "    def get(self, url: str, **kwargs: Any) -> Response:\n"
    '        """GET ``url``; served from ``cache`` when one is set and the URL is fresh in it."""\n'
    "        if self.cache is None or kwargs:\n"
    '            return self.request("GET", url, **kwargs)\n'
    "        cached = self.cache.get(url)\n"
    "        if cached is not None:\n"
    "            return cached\n"
    '        response = self.request("GET", url)\n'
    "        self.cache.put(response.url, response)\n"
    "        return response"
)

_CIRCULAR = """==================================== ERRORS ====================================
____________________ ERROR collecting tests/test_client.py _____________________
ImportError while importing test module '/Users/mara/src/fetchkit/tests/test_client.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/opt/homebrew/Cellar/python@3.12/3.12.7/Frameworks/Python.framework/Versions/3.12/lib/python3.12/importlib/__init__.py:90: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
tests/test_client.py:5: in <module>
    from fetchkit import Client, HTTPStatusError
fetchkit/__init__.py:1: in <module>
    from fetchkit.client import Client, Response
fetchkit/client.py:11: in <module>
    from fetchkit.cache import ResponseCache
fetchkit/cache.py:10: in <module>
    from fetchkit.client import Response
E   ImportError: cannot import name 'Response' from partially initialized module 'fetchkit.client' (most likely due to a circular import) (/Users/mara/src/fetchkit/fetchkit/client.py)
=========================== short test summary info ============================
ERROR tests/test_client.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.22s ==============================="""

_MAX_AGE_FAIL = """    @respx.mock
    def test_max_age_is_honoured():
        clock = FakeClock()
        route = respx.get("https://api.test/cfg").mock(
            return_value=httpx.Response(200, json={"v": 1}, headers={"Cache-Control": "max-age=60"})
        )
        with Client(base_url="https://api.test", cache=ResponseCache(clock=clock)) as client:
            client.get("/cfg")
            client.get("/cfg")
>           assert route.call_count == 1
E           assert 2 == 1
E            +  where 2 = <Route <Scheme eq 'https'> AND <Host eq 'api.test'> AND <Path eq '/cfg'> AND <Method eq 'GET'>>.call_count

tests/test_cache.py:26: AssertionError"""


def _cache_turn(s: Session) -> None:
    s.user(
        "I'd like fetchkit to optionally cache GET responses in memory, honouring `Cache-Control: max-age`. "
        "Opt-in via `Client(cache=...)`; without a cache nothing should change. Please add tests too."
    )
    s.do("I'll look at the package layout first.", s.ls("."))
    s.do(None, s.read("fetchkit/client.py"), s.read("fetchkit/errors.py"), s.read("pyproject.toml"))
    s.do(None, s.read("tests/test_client.py"))
    s.do(None, s.grep(r"def (get|request)\(", "fetchkit"))
    s.do(
        "Plan: a separate `ResponseCache` (LRU, injectable clock for tests) in `fetchkit/cache.py`, and a "
        "`cache` field on `Client` that `get()` consults. Writing the cache module first.",
        s.write("fetchkit/cache.py", CACHE_V1.replace(_PUT_TYPED, _PUT_UNTYPED)),
    )
    s.do(
        None,
        s.edit(
            "fetchkit/client.py",
            "    headers: dict[str, str] = field(default_factory=dict)\n",
            "    headers: dict[str, str] = field(default_factory=dict)\n    cache: ResponseCache | None = None\n",
        ),
    )
    s.do(
        None,
        s.edit(
            "fetchkit/client.py",
            "from fetchkit.errors import HTTPStatusError, RetryExhausted\n",
            "from fetchkit.cache import ResponseCache\nfrom fetchkit.errors import HTTPStatusError, RetryExhausted\n",
        ),
    )
    s.do(None, s.edit("fetchkit/client.py", _GET_OLD, _GET_NEW))
    s.do(None, s.run("python -m pytest tests/ -q", _CIRCULAR, 2))
    s.do(
        "Circular import: `cache.py` needs `Response` from `client.py`. The client only needs the cache "
        "class for the annotation, so I'll import it under TYPE_CHECKING.",
        s.edit(
            "fetchkit/client.py",
            "from fetchkit.cache import ResponseCache\nfrom fetchkit.errors import HTTPStatusError, RetryExhausted\n",
            "from fetchkit.errors import HTTPStatusError, RetryExhausted\n\n"
            "if TYPE_CHECKING:\n    from fetchkit.cache import ResponseCache\n",
        ),
    )
    s.do(
        None,
        s.edit(
            "fetchkit/client.py",
            "from typing import Any, Mapping\n",
            "from typing import TYPE_CHECKING, Any, Mapping\n",
        ),
    )
    s.do(None, s.run("python -m pytest tests/ -q", _green(), 0))
    mypy_errors = [
        "fetchkit/cache.py:31: error: Function is missing a type annotation  [no-untyped-def]",
        'fetchkit/client.py:84: error: Call to untyped function "put" in typed context  [no-untyped-call]',
    ]
    s.do(None, s.run("mypy", _mypy(mypy_errors), 1))
    s.do(None, s.edit("fetchkit/cache.py", _PUT_UNTYPED, _PUT_TYPED))
    s.do(None, s.run("mypy", _mypy([]), 0))
    s.do("Now the tests for the cache.", s.write("tests/test_cache.py", TEST_CACHE))
    cache_fail = _pytest(
        [("tests/test_cache.py", "F."), ("tests/test_client.py", "....")],
        [("test_max_age_is_honoured", _MAX_AGE_FAIL)],
        ["FAILED tests/test_cache.py::test_max_age_is_honoured - assert 2 == 1"],
        0.35,
    )
    s.do(None, s.run("python -m pytest tests/ -q", cache_fail, 1))
    s.do(
        "The second GET went to the network. Looking at how `get()` keys the cache.",
        s.read("fetchkit/client.py"),
    )
    s.do(
        "Found it: `put()` stores under `response.url` (absolute, `https://api.test/cfg`) while `get()` "
        "looks up the relative `/cfg`. Both should use the URL as the caller passed it.",
        s.edit(
            "fetchkit/client.py",
            "        self.cache.put(response.url, response)\n",
            "        self.cache.put(url, response)\n",
        ),
    )
    s.do(None, s.run("python -m pytest tests/ -q", _green(".."), 0))
    s.do(None, s.run("mypy", _mypy([]), 0))
    s.say(
        "Added an opt-in response cache:\n\n- `fetchkit/cache.py`: `ResponseCache(max_entries=256, clock=...)`, "
        "LRU, stores a GET response for `max-age` seconds when `Cache-Control` has one.\n- `Client(cache=...)`: "
        "`get()` serves fresh entries from the cache; requests with extra kwargs bypass it.\n"
        "- `tests/test_cache.py`: max-age honoured (with a fake clock) and no caching without max-age.\n\n"
        "Without a cache the behaviour is unchanged (`test_each_get_hits_the_network` still passes). "
        "pytest: 6 passed; mypy --strict: clean."
    )


def _no_store_turn(s: Session) -> None:
    s.user("Can the cache also respect `no-store` and `no-cache`? Those responses must never be served from cache.")
    s.do(None, s.read("fetchkit/cache.py"))
    s.do(
        None,
        s.edit(
            "fetchkit/cache.py",
            '        control = response.headers.get("cache-control", "")\n',
            '        control = response.headers.get("cache-control", "").lower()\n'
            '        if "no-store" in control or "no-cache" in control:\n            return\n',
        ),
    )
    s.do(
        None,
        s.edit(
            "tests/test_cache.py",
            "@respx.mock\ndef test_without_max_age_nothing_is_cached():",
            "@respx.mock\ndef test_no_store_wins_over_max_age():\n"
            '    route = respx.get("https://api.test/me").mock(\n'
            '        return_value=httpx.Response(200, json={}, headers={"Cache-Control": "max-age=60, no-store"})\n'
            "    )\n"
            '    with Client(base_url="https://api.test", cache=ResponseCache()) as client:\n'
            '        client.get("/me")\n        client.get("/me")\n    assert route.call_count == 2\n\n\n'
            "@respx.mock\ndef test_without_max_age_nothing_is_cached():",
        ),
    )
    s.do(None, s.run("python -m pytest tests/ -q", _green("..."), 0))
    s.do(None, s.run("mypy", _mypy([]), 0))
    s.say(
        "Done: `no-store` or `no-cache` anywhere in `Cache-Control` (any case) means the response is not cached, "
        "even with a `max-age`. New test added; 7 passed, mypy clean."
    )


_STRESS = (
    "python - <<'EOF'\nimport threading\nfrom fetchkit.client import Response\nfrom fetchkit.cache import ResponseCache\n"
    "cache = ResponseCache(max_entries=64)\nresp = Response(200, {'cache-control': 'max-age=60'}, b'{}', '/x')\n"
    "def work(n):\n    for i in range(20000):\n        url = f'/u{(i * n) % 200}'\n        cache.put(url, resp)\n"
    "        cache.get(url)\nthreads = [threading.Thread(target=work, args=(n,)) for n in range(1, 9)]\n"
    "[t.start() for t in threads]; [t.join() for t in threads]\nprint('ok', len(cache._entries))\nEOF"
)

_STRESS_FAIL = """Exception in thread Thread-3 (work):
Traceback (most recent call last):
  File "/opt/homebrew/Cellar/python@3.12/3.12.7/Frameworks/Python.framework/Versions/3.12/lib/python3.12/threading.py", line 1075, in _bootstrap_inner
    self.run()
  File "/opt/homebrew/Cellar/python@3.12/3.12.7/Frameworks/Python.framework/Versions/3.12/lib/python3.12/threading.py", line 1012, in run
    self._target(*self._args, **self._kwargs)
  File "<stdin>", line 10, in work
  File "/Users/mara/src/fetchkit/fetchkit/cache.py", line 29, in get
    self._entries.move_to_end(url)
KeyError: '/u136'
Exception in thread Thread-6 (work):
Traceback (most recent call last):
  File "/opt/homebrew/Cellar/python@3.12/3.12.7/Frameworks/Python.framework/Versions/3.12/lib/python3.12/threading.py", line 1075, in _bootstrap_inner
    self.run()
  File "/opt/homebrew/Cellar/python@3.12/3.12.7/Frameworks/Python.framework/Versions/3.12/lib/python3.12/threading.py", line 1012, in run
    self._target(*self._args, **self._kwargs)
  File "<stdin>", line 11, in work
  File "/Users/mara/src/fetchkit/fetchkit/cache.py", line 42, in put
    self._entries.popitem(last=False)
KeyError: 'dictionary is empty'
ok 61"""


def _threads_turn(s: Session) -> None:
    s.user("What happens with concurrent requests? We call one Client from a thread pool in the importer service.")
    s.do(None, s.read("fetchkit/cache.py"))
    s.do(None, s.grep("threading|Lock", "fetchkit"))
    s.do(
        "Nothing guards the OrderedDict. Let me show the race with a quick stress run.", s.run(_STRESS, _STRESS_FAIL, 0)
    )
    s.do(
        "Confirmed: concurrent `get`/`put` corrupt the LRU order (KeyError in `move_to_end` and `popitem`). "
        "I'll guard the dictionary with a lock.",
        s.edit(
            "fetchkit/cache.py",
            "    def get(self, url: str) -> Response | None:\n        item = self._entries.get(url)\n",
            "    def get(self, url: str) -> Response | None:\n        with self._lock:\n            item = self._entries.get(url)\n",
        ),
    )
    s.do(None, s.read("fetchkit/cache.py"))
    s.do(
        "Simpler to wrap the whole bodies. Rewriting the class with the lock in place.",
        s.write(
            "fetchkit/cache.py",
            CACHE_V1.replace(
                '        control = response.headers.get("cache-control", "")\n',
                '        control = response.headers.get("cache-control", "").lower()\n'
                '        if "no-store" in control or "no-cache" in control:\n            return\n',
            )
            .replace("import re\nimport time\n", "import re\nimport threading\nimport time\n")
            .replace(
                "        self._entries: OrderedDict[str, tuple[float, Response]] = OrderedDict()\n",
                "        self._entries: OrderedDict[str, tuple[float, Response]] = OrderedDict()\n"
                "        self._lock = threading.Lock()\n",
            )
            .replace(
                "        item = self._entries.get(url)\n        if item is None:\n            return None\n"
                "        expires, response = item\n        if self._clock() >= expires:\n"
                "            del self._entries[url]\n            return None\n"
                "        self._entries.move_to_end(url)\n        return response\n",
                "        with self._lock:\n            item = self._entries.get(url)\n            if item is None:\n"
                "                return None\n            expires, response = item\n"
                "            if self._clock() >= expires:\n                del self._entries[url]\n"
                "                return None\n            self._entries.move_to_end(url)\n            return response\n",
            )
            .replace(
                "        self._entries[url] = (self._clock() + int(match.group(1)), response)\n"
                "        self._entries.move_to_end(url)\n        while len(self._entries) > self.max_entries:\n"
                "            self._entries.popitem(last=False)\n",
                "        expires = self._clock() + int(match.group(1))\n        with self._lock:\n"
                "            self._entries[url] = (expires, response)\n            self._entries.move_to_end(url)\n"
                "            while len(self._entries) > self.max_entries:\n"
                "                self._entries.popitem(last=False)\n",
            ),
        ),
    )
    s.do(None, s.run(_STRESS, "ok 64", 0))
    s.do(None, s.run("python -m pytest tests/ -q", _green("..."), 0))
    s.do(None, s.run("mypy", _mypy([]), 0))
    s.say(
        "Before: the cache was not thread-safe (the stress run raised KeyErrors from the OrderedDict). Now every "
        "read and write of the entries happens under a `threading.Lock`; the same 8-thread stress run finishes "
        "cleanly and the size stays at `max_entries` (64). Note that two threads missing the same URL at the "
        "same time will both hit the network; that is harmless here, so I kept it simple."
    )


def _commit_turns(s: Session) -> None:
    s.user("ok, run the whole suite plus mypy one final time and commit it")
    s.do(None, s.run("python -m pytest tests/ -q", _green("..."), 0))
    s.do(None, s.run("mypy", _mypy([]), 0))
    s.do(
        None,
        s.run(
            "git status --short",
            " M fetchkit/client.py\n?? fetchkit/cache.py\n?? tests/test_cache.py",
            0,
        ),
    )
    commit = (
        'git add fetchkit/cache.py fetchkit/client.py tests/test_cache.py && git commit -m "Add opt-in '
        'in-memory response cache honouring Cache-Control"'
    )
    hook_fail = (
        "ruff.....................................................................Passed\n"
        "ruff-format..............................................................Failed\n"
        "- hook id: ruff-format\n- files were modified by this hook\n\n2 files reformatted, 1 file left unchanged"
    )
    s.do(None, s.run(commit, hook_fail, 1))
    s.do(
        "The pre-commit hook reformatted two files; staging them again and retrying.",
        s.run(
            commit,
            (
                "ruff.....................................................................Passed\n"
                "ruff-format..............................................................Passed\n"
                "[feature/response-cache 3f9c2a1] Add opt-in in-memory response cache honouring Cache-Control\n"
                " 3 files changed, 112 insertions(+), 2 deletions(-)\n create mode 100644 fetchkit/cache.py\n"
                " create mode 100644 tests/test_cache.py"
            ),
            0,
        ),
    )
    s.say(
        "All 7 tests pass and mypy is clean. Committed as 3f9c2a1 on `feature/response-cache` "
        "(after ruff-format reformatted two files in the pre-commit hook)."
    )
    s.user("Also bump the version to 1.5.0 and add a changelog entry")
    s.do(None, s.read("CHANGELOG.md"))
    s.do("There is no changelog yet; I'll check the docs folder.", s.ls("."))
    s.do(None, s.edit("pyproject.toml", 'version = "1.4.2"', 'version = "1.5.0"'))
    s.do(
        None,
        s.write(
            "CHANGELOG.md",
            "# Changelog\n\n## 1.5.0\n\n- Optional in-memory cache for GET responses: `Client(cache=ResponseCache())`. "
            "Honours `Cache-Control: max-age`, never stores `no-store`/`no-cache` responses; thread-safe.\n",
        ),
    )
    s.do(
        None,
        s.run(
            'git add pyproject.toml CHANGELOG.md && git commit -m "Release 1.5.0"',
            "ruff.....................................................................Passed\n"
            "ruff-format..............................................................Passed\n"
            "[feature/response-cache 8d41e07] Release 1.5.0\n 2 files changed, 6 insertions(+), 1 deletion(-)\n"
            " create mode 100644 CHANGELOG.md",
            0,
        ),
    )
    s.say("Bumped to 1.5.0 and started CHANGELOG.md with the cache entry; committed as 8d41e07.")
    s.user("thanks!")
    s.say("You're welcome! The branch `feature/response-cache` is ready for a PR.")


def build() -> Session:
    s = Session("fetchkit", "anthropic", ROOT, FILES)
    s.system(
        "You are Claude Code, an interactive CLI coding assistant. The user's project is at "
        "/Users/mara/src/fetchkit (git repository, branch feature/response-cache). Use the tools to explore, "
        "edit and test. Prefer small, verified steps."
    )
    _cache_turn(s)
    _no_store_turn(s)
    _threads_turn(s)
    _commit_turns(s)
    return s
