"""The demo's stand-in for a fleet's shared compile cache: Debian's redis-server."""

from __future__ import annotations

import socket
from pathlib import Path

from conftest import need

from rocmgraph.demo.machine import compile_cache

PORT = 28479


def ask(port: int, *commands: str) -> list[bytes]:
    """The first line of redis's reply to each of ``commands``, sent on one connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall("".join(f"{command}\r\n" for command in commands).encode())
        reply = b""
        while reply.count(b"\r\n") < len(commands):
            reply += conn.recv(4096)
    return reply.split(b"\r\n")[: len(commands)]


def test_a_password_goes_into_a_file_of_its_owner_s_alone_even_one_left_open(
    tmp_path: Path,
) -> None:
    """A redis.conf there already, readable by others, is narrowed before it takes the
    password; redis then asks for it."""
    need("redis-server")
    config = tmp_path / "redis.conf"
    config.write_text("")
    config.chmod(0o644)
    with compile_cache(tmp_path, PORT, "pw-one") as location:
        assert location == f"redis://127.0.0.1:{PORT}"
        assert config.stat().st_mode & 0o777 == 0o600
        assert config.read_text() == "requirepass pw-one\n"
        assert ask(PORT, "PING")[0].startswith(b"-NOAUTH")
        assert ask(PORT, "AUTH pw-one", "PING") == [b"+OK", b"+PONG"]
