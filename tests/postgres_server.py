"""A throwaway PostgreSQL server on 127.0.0.1 for the tests that need a real one.

It uses the server binaries of Debian's `postgresql` package (`.ci/run` installs it), runs them as the
`postgres` user when the tests run as root (PostgreSQL refuses root), keeps its data in a temporary
folder and listens on a free port of 127.0.0.1, where a client must give the password (SCRAM), so
that a wrong one is refused as on any real server; its own Unix socket trusts local clients.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def server_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None where PostgreSQL is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server, create database `nasutil`, yield its URL; stop the server and remove its data after."""
    binaries = server_binaries()
    if binaries is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    folder = Path(tempfile.mkdtemp(prefix="nasutil-pg-"))
    data = folder / "data"
    if as_postgres:
        shutil.chown(folder, "postgres", "postgres")
    port = _free_port()

    def run(*command: str) -> None:
        subprocess.run([*as_postgres, *command], check=True, capture_output=True, timeout=120)

    password = secrets.token_hex(8)
    pwfile = folder / "password"
    pwfile.write_text(password + "\n")
    if as_postgres:
        shutil.chown(pwfile, "postgres", "postgres")
    try:
        run(str(binaries / "initdb"), "-D", str(data), "--auth-local=trust", "--auth-host=scram-sha-256",
            "-U", "postgres", f"--pwfile={pwfile}", "--no-sync")
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        run(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "server.log"), "-w",
            "start")
        try:
            run(str(binaries / "createdb"), "-h", str(folder), "-p", str(port), "-U", "postgres", "nasutil")
            yield f"postgresql://postgres:{password}@127.0.0.1:{port}/nasutil"
        finally:
            run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
