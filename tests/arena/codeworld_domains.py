"""Code-world runtimes for the tests: a small shop, and a domain whose tools misbehave.

Imported by sandboxed workers (the tests put this folder on their import
path and name the runtimes to ``CodeWorlds``); never imported from a record.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from typing import Any

from coevo.arena.codeworld import FunctionRuntime


def find_order(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    """An order by id."""
    for order in state["orders"]:
        if order["id"] == order_id:
            return order
    raise ValueError(f"no order {order_id}")


def cancel_order(state: dict[str, Any], order_id: str, reason: str) -> dict[str, Any]:
    """Cancel a pending order."""
    order = find_order(state, order_id)
    if order["status"] != "pending":
        raise ValueError(f"order {order_id} is {order['status']}, not pending")
    order["status"] = "cancelled"
    order["reason"] = reason
    return order


def set_tags(state: dict[str, Any], order_id: str, tags: list[str]) -> dict[str, Any]:
    """Replace an order's tags."""
    order = find_order(state, order_id)
    order["tags"] = sorted(set(tags))
    return order


def note_visit(state: dict[str, Any]) -> int:
    """Record a visit under a fresh ticket number (not the same twice: a nondeterministic write)."""
    ticket = int.from_bytes(os.urandom(4), "big")
    state.setdefault("visits", []).append(ticket)
    return ticket


SHOP = FunctionRuntime(
    {
        "find_order": find_order,
        "cancel_order": cancel_order,
        "set_tags": set_tags,
        "note_visit": note_visit,
    }
)


def read_file(state: dict[str, Any], path: str) -> str:
    """Read any file."""
    with open(path) as handle:
        return handle.read(100)


def connect(state: dict[str, Any], port: int) -> str:
    """Open a TCP connection to 127.0.0.1."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
        conn.sendall(b"escaped")
    return "connected"


def fork_bomb(state: dict[str, Any]) -> int:
    """Fork up to 10,000 children that sleep (they are killed on the way out)."""
    children = []
    try:
        for _ in range(10_000):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            children.append(pid)
    finally:
        for pid in children:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    return len(children)


def allocate(state: dict[str, Any], gib: int) -> int:
    """Allocate ``gib`` GiB."""
    return len(bytearray(gib << 30))


def spin(state: dict[str, Any]) -> None:
    """Loop forever."""
    while True:
        pass


def hang(state: dict[str, Any]) -> None:
    """Sleep forever (no CPU: only the wall clock stops it)."""
    time.sleep(3600)


def die(state: dict[str, Any]) -> None:
    """Kill the worker process."""
    os._exit(3)


def count(state: dict[str, Any]) -> int:
    """A harmless write: one more."""
    state["n"] = state.get("n", 0) + 1
    return state["n"]


def flood(state: dict[str, Any], megabytes: int) -> str:
    """Return ``megabytes`` MiB of text."""
    return "A" * (megabytes << 20)


def shout(state: dict[str, Any], megabytes: int) -> None:
    """Raise an error whose message is ``megabytes`` MiB long."""
    raise ValueError("A" * (megabytes << 20))


def grow(state: dict[str, Any], megabytes: int) -> int:
    """Put ``megabytes`` MiB of text into the state."""
    state["blob"] = "G" * (megabytes << 20)
    return megabytes


def forge(state: dict[str, Any], megabytes: int) -> str:
    """Write an answer of ``megabytes`` MiB on the worker's own pipe to the parent, past the worker's checks."""
    body = b'{"ok":true,"result":"' + b"F" * (megabytes << 20) + b'"}'
    for fd in range(3, 256):  # the answer pipe: the one pipe this process can write to
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, len(body).to_bytes(4, "big"))
                os.write(fd, body)  # blocks until the parent reads it (or kills this worker)
                return "forged"
        except OSError:
            continue
    return "no pipe found"


HOSTILE = FunctionRuntime(
    {
        "read_file": read_file,
        "connect": connect,
        "fork_bomb": fork_bomb,
        "allocate": allocate,
        "spin": spin,
        "hang": hang,
        "die": die,
        "count": count,
        "flood": flood,
        "shout": shout,
        "grow": grow,
        "forge": forge,
    }
)
