"""A PostgreSQL password never shows: not in errors, ``stats``, ``doctor``, debug logs, tracebacks
or exports, whatever URL-special character it holds, written as is or percent-encoded, in the
user part of the URL or as a ``password=`` parameter (issue 22, item 1)."""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip("psycopg")

from click.testing import CliRunner, Result  # noqa: E402
from pg_helpers import fresh_schema, server_url  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.cli.main import cli  # noqa: E402
from tiermem.errors import ConfigError, StorageError, TiermemError  # noqa: E402
from tiermem.storage.postgres.conninfo import check_url, safe_url, scrub  # noqa: E402
from tiermem.testing import HashEmbedder  # noqa: E402

SPECIALS = "#?/@:%&= +[]!$'()*,;\"\\"
HEAD, TAIL = "Quokka", "Wombat42"  # every password here is HEAD + special character(s) + TAIL
UNREACHABLE = "127.0.0.1:1"  # nothing listens there: the connection is refused at once
ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}


def urls(password: str, where: str = f"{UNREACHABLE}/memory", query: str = "") -> list[str]:
    """The ways to give ``password`` in a URL: as is and percent-encoded in the user part, and as a
    ``password=`` parameter."""
    encoded = quote(password, safe="")
    sep = "&" if query else ""
    return [f"postgresql://tm:{password}@{where}?{query}".rstrip("?"),
            f"postgresql://tm:{encoded}@{where}?{query}".rstrip("?"),
            f"postgresql://tm@{where}?{query}{sep}password={encoded}"]


def leaks(text: str, password: str) -> list[str]:
    """The pieces of ``password`` found in ``text`` (either half of it is enough to fail)."""
    return [piece for piece in {password, quote(password, safe=""), HEAD, TAIL} if piece in text]


def run(root: Path, *args: str, url: str) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], env={**ENV, "TIERMEM_DATABASE_URL": url})


def shown(result: Result) -> str:
    """All a user sees of a CLI run: its output and, with --debug, the traceback it ends in."""
    if result.exc_info is None or isinstance(result.exception, SystemExit):
        return result.output
    return result.output + "".join(traceback.format_exception(*result.exc_info))


# --- the masker itself --------------------------------------------------------------------------------
@pytest.mark.parametrize("char", SPECIALS)
def test_the_label_never_holds_the_password(char: str) -> None:
    password = f"{HEAD}{char}{TAIL}"
    for url in urls(password):
        label = safe_url(url)
        assert not leaks(label, password), (url, label)
        assert label.startswith("postgresql://") and "***" in label, (url, label)


def test_the_label_is_libpqs_reading_of_the_url() -> None:
    assert safe_url("postgresql://ann:Hunter2#Secret@db.example:5432/mem") == "postgresql://ann:***@db.example:5432/mem"
    assert (safe_url("postgresql://db/mem?user=ann&password=s3c%26ret&sslmode=require&sslpassword=k3y")
            == "postgresql://ann:***@db/mem?sslmode=require&sslpassword=***")
    assert safe_url("postgresql://db.example/mem") == "postgresql://db.example/mem"
    assert (safe_url("postgres://tm@db/mem?options=-csearch_path%3Dteam_a,public")
            == "postgres://tm@db/mem?options=-csearch_path%3Dteam_a,public")
    assert safe_url("postgresql://postgres:@/postgres?host=/tmp/pg") == "postgresql://postgres@/postgres?host=/tmp/pg"
    # libpq would read these other than meant, or not at all: nothing after the scheme is shown
    for url in ("postgresql://tm:Quokka/Wombat42@db/mem", "postgresql://tm:Quokka@Wombat42@db/mem",
                "postgresql://tm:Quokka%zzWombat42@db/mem", "postgresql://[::1:5432/Quokka"):
        assert safe_url(url) == "postgresql://***", url


def test_a_driver_message_loses_the_url_and_every_spelling_of_the_password() -> None:
    url = "postgresql://tm:Quokka%23Wombat42@db/mem?sslpassword=Kiwi%2F99"
    message = (f'invalid URI: "{url}"; Quokka%23Wombat42 Quokka#Wombat42 Kiwi%2F99 Kiwi/99'
               " host=db password='Emu 7' sslpassword=Emu8")
    cleaned = scrub(message, url)
    for piece in ("Quokka", "Wombat42", "Kiwi", "Emu"):
        assert piece not in cleaned, cleaned
    assert cleaned.startswith('invalid URI: "postgresql://tm:***@db/mem?sslpassword=***"')


@pytest.mark.parametrize("url", ["postgresql://tm:Quokka/Wombat42@db/mem", "postgresql://tm:Quokka@Wombat42@db/mem",
                                 "postgresql://tm:Quokka%Wombat42@db/mem", "postgresql://tm:Quokka Wombat42@db/mem",
                                 "host=db password=QuokkaWombat42", "host=db password=Quokka://Wombat42"])
def test_a_url_libpq_would_misread_is_refused_without_quoting_it(url: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        Memory(tmp_path / "mem", embedder=HashEmbedder(), database_url=url)
    assert not leaks(str(caught.value), "QuokkaWombat42"), str(caught.value)
    assert "database_url" in str(caught.value)
    result = run(tmp_path / "mem", "stats", url=url)
    assert result.exit_code == 1 and "database_url" in result.output and not leaks(result.output, "QuokkaWombat42")
    if "://" in url:
        with pytest.raises(ConfigError):
            check_url(url)


# --- every output path, on a server that is not there -------------------------------------------------
@pytest.mark.parametrize("char", SPECIALS)
def test_a_failed_connection_never_shows_the_password(char: str, tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    password = f"{HEAD}{char}{TAIL}"
    caplog.set_level(logging.DEBUG)
    for url in urls(password, query="connect_timeout=2"):
        with pytest.raises(TiermemError) as caught:
            Memory(tmp_path / "lib", embedder=HashEmbedder(), database_url=url)
        assert not leaks(str(caught.value), password), (url, str(caught.value))
        for args in (["stats"], ["init"], ["doctor"], ["doctor", "--json"], ["--debug", "stats"]):
            result = run(tmp_path / "mem", *args, url=url)
            text = shown(result)
            assert not leaks(text, password), (url, args, text)
            assert result.exit_code != 0 or args[0] == "doctor", (url, args, text)
        migrated = CliRunner().invoke(cli, ["--root", str(tmp_path / "mem"), "migrate", "--to", url], env=ENV)
        assert not leaks(shown(migrated), password), (url, shown(migrated))
    assert not leaks(caplog.text, password), caplog.text


# --- every output path, on a real server ------------------------------------------------------------------
@contextmanager
def role_with_password(password: str) -> Iterator[str]:
    """A new login role of the session's server whose password is ``password``; yields its name."""
    import psycopg

    role = f"tm_pw_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(server_url(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{password.replace(chr(39), chr(39) * 2)}'")
    except psycopg.Error as exc:
        pytest.skip(f"the test server does not let this user create a role: {exc}")
    try:
        yield role
    finally:
        with psycopg.connect(server_url(), autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def with_role(url: str, role: str, password: str, form: int, dbname: str | None = None) -> str:
    """The store's ``url`` (the session server's, with its schema) logging in as ``role`` with ``password``
    given the ``form``-th way of :func:`urls` (to ``dbname`` instead of the URL's, when given)."""
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(url)
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in info.items()
                     if k not in ("user", "password", "dbname") and v is not None)
    built = urls(password, where=f"/{dbname or info['dbname']}", query=query)[form].replace("tm", role, 1)
    assert conninfo_to_dict(built)["password"] == password
    return built


RAW_OK = "".join(c for c in SPECIALS if c not in "/@% ")  # what libpq reads unencoded in the user part


@pytest.mark.parametrize(("form", "password"), [(0, f"{HEAD}{RAW_OK}{TAIL}"), (1, f"{HEAD}{SPECIALS}{TAIL}"),
                                                (2, f"{HEAD}{SPECIALS}{TAIL}")])
def test_a_working_store_never_shows_the_password(form: int, password: str, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with role_with_password(password) as role, fresh_schema() as base:
        url = with_role(base, role, password, form)
        root = tmp_path / "mem"
        with Memory(root, embedder=HashEmbedder(), database_url=url) as mem:
            mem.facts.add("Prefers dark mode", "preference", 0.9)
            assert mem.search("dark mode") and "***" in mem.db.label
            for text in (mem.db.label, json.dumps(mem.stats()), json.dumps(mem.export())):
                assert not leaks(text, password), text
            with pytest.raises(StorageError) as caught:
                mem.db.rows("SELECT * FROM no_such_table")
            assert not leaks(str(caught.value), password)
        for args in (["init"], ["stats"], ["stats", "--json"], ["doctor"], ["doctor", "--json"], ["export"],
                     ["--debug", "facts", "list"], ["--debug", "stats"]):
            result = run(root, *args, url=url)
            assert result.exit_code == 0, (args, shown(result))
            assert not leaks(shown(result), password), (args, result.output)
        assert "***" in run(root, "doctor", url=url).output
        result = run(root, "stats", url=with_role(base, role, password, form, dbname="no_such_database"))
        assert result.exit_code == 1 and "no_such_database" in result.output, result.output
        assert not leaks(result.output, password), result.output
    assert not leaks(caplog.text, password)
