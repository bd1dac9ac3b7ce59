"""What tiermem may show of a PostgreSQL URL: the URL as libpq reads it, never its secrets.

Every label, message, report and log line of tiermem that names a PostgreSQL database goes
through this module (the store's ``label``, ``tiermem stats``, ``tiermem doctor``, the errors of
the pool, the locks and the statements):

- :func:`safe_url` rebuilds the URL from libpq's own reading of it (psycopg's
  ``conninfo_to_dict``) with the password shown as ``***``. Nothing of the given text is copied,
  so a password holding ``#``, ``?``, ``:`` or ``%``-escapes cannot slip past a pattern. A URL
  libpq cannot read, or reads other than meant (below), shows as ``postgresql://***``.
- :func:`scrub` takes out of a driver message the URL itself and every spelling of its secrets:
  each password as written in the URL and percent-decoded, and any ``password=...``.
- :func:`check_url` refuses, before anything connects, a key/value connection string, a URL
  libpq cannot read, and one holding an unencoded ``@`` or ``/`` in its user name or password:
  libpq ends the user part at the first ``@`` before any ``/``, so it would take the rest of such
  a password for the host, port or database name (and show it in its messages and debug logs).
  Its messages never quote the URL.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from tiermem.errors import ConfigError

MASK = "***"
SECRET_KEYS = ("password", "sslpassword")  # libpq parameters whose values are secrets
PREFIXES = ("postgresql://", "postgres://")  # what libpq reads as a URL (anything else as key/value pairs)
_KEYWORD = re.compile(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+)")
_ENCODE = ("percent-encode '@', '/', '%' and spaces in the user name and password (%40, %2F, %25, %20; '&' and"
           " '=' too in a password= parameter)")


def safe_url(url: str) -> str:
    """``url`` as libpq reads it, with its password replaced by ``***`` (see the module docstring)."""
    info = _read(url)
    return _render(info) if info is not None else f"{_scheme(url)}://{MASK}"


def check_url(url: str) -> None:
    """Raise :class:`~tiermem.errors.ConfigError` (never quoting ``url``) for a database URL libpq
    cannot read, or would read other than meant (see the module docstring)."""
    if not url.startswith(PREFIXES):
        raise ConfigError("database_url must be a URL starting with postgresql:// (postgresql://user@host:5432/db);"
                          " key/value connection strings are not accepted")
    if _parse(url) is None:
        raise ConfigError(f"database_url cannot be read as a PostgreSQL URL: {_ENCODE}")
    if _read(url) is None:
        raise ConfigError(f"database_url would be misread: libpq ends the user name and password at the first '@'"
                          f" before any '/' and would take the rest for the host or database name; {_ENCODE}")


def scrub(message: str, url: str) -> str:
    """``message`` (a driver's) without ``url`` or any spelling of its secrets, nor any ``password=...``."""
    parts = message.split(url) if url else [message]  # a message quoting the whole URL shows its label instead
    for secret in sorted(secrets(url), key=len, reverse=True):
        parts = [part.replace(secret, MASK) for part in parts]
    return safe_url(url).join(_KEYWORD.sub(lambda m: m.group(1) + MASK, part) for part in parts)


def secrets(url: str) -> set[str]:
    """Every spelling of the secrets in ``url``: libpq's values, and each as written and decoded."""
    info = _parse(url) or {}
    found = {info[key] for key in SECRET_KEYS if info.get(key)}
    body = url.split("://", 1)[-1]
    userinfo, rest = _split_userinfo(body)
    # the password where libpq splits the user part, and where a reader splitting at the last '@' would
    written = [userinfo.partition(":")[2], body.rpartition("@")[0].partition(":")[2]]
    for pair in rest.partition("?")[2].split("&"):
        key, _, value = pair.partition("=")
        if unquote(key).strip().lower() in SECRET_KEYS:
            written.append(value)
    for raw in written:
        found.update({raw, unquote(raw)})
    return {s for s in found if s}


def _split_userinfo(body: str) -> tuple[str, str]:
    """``(user:password, the rest)`` of a URL's text after ``://``, split where libpq splits it:
    at the first ``@`` before any ``/``."""
    at, slash = body.find("@"), body.find("/")
    if at >= 0 and (slash < 0 or at < slash):
        return body[:at], body[at + 1:]
    return "", body


def _parse(url: str) -> dict[str, str] | None:
    """libpq's reading of ``url``; None when it cannot read it (or psycopg is not installed)."""
    if not url.startswith(PREFIXES):
        return None  # libpq would read it as key/value pairs: refused, so never shown
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return None
    try:
        return {str(k): str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    except (psycopg.Error, ValueError, TypeError):
        return None


def _read(url: str) -> dict[str, str] | None:
    """libpq's reading of ``url`` when it is the one meant: None when libpq cannot read it, or when an
    ``@`` remains past the user part in the host or path, or in the host or port libpq read."""
    info = _parse(url)
    if info is None:
        return None
    rest = _split_userinfo(url.split("://", 1)[1])[1]
    if "@" in rest.partition("?")[0] or "@" in info.get("host", "") + info.get("port", ""):
        return None
    return {"scheme": _scheme(url), **info}


def _scheme(url: str) -> str:
    return "postgres" if url.startswith("postgres://") else "postgresql"


def _render(info: dict[str, str]) -> str:
    """A URL of libpq's reading ``info``, its secrets shown as ``***``."""
    params = dict(info)
    scheme, user, dbname = params.pop("scheme"), params.pop("user", ""), params.pop("dbname", "")
    password = params.pop("password", "")
    who = quote(user, safe="") + (f":{MASK}" if password else "")
    host, port = params.get("host", ""), params.get("port", "")
    where = ""
    if host and not host.startswith("/") and "," not in host + port:
        where = (f"[{host}]" if ":" in host else quote(host, safe="")) + (f":{quote(port, safe='')}" if port else "")
        params.pop("host")
        params.pop("port", None)
    netloc = f"{who}@{where}" if who else where
    query = "&".join(f"{quote(k, safe='')}={MASK if k in SECRET_KEYS else quote(v, safe='/,:')}"
                     for k, v in params.items())
    return f"{scheme}://{netloc}" + (f"/{quote(dbname, safe='')}" if dbname else "") + (f"?{query}" if query else "")
