"""Jobs for the worker-pool tests: run inside worker processes (``python -m coevo.arena.workers``)."""

from __future__ import annotations

import os
import time
from typing import Any

_seen = {"jobs": 0}


def job(message: dict[str, Any]) -> dict[str, Any]:
    """Do what ``message["do"]`` says; answer with the worker's pid and how many jobs it has run."""
    _seen["jobs"] += 1
    action = message.get("do")
    if action == "sleep":
        time.sleep(message["seconds"])
    elif action == "exit":
        os._exit(message["status"])
    elif action == "raise":
        raise ValueError("asked to fail")
    elif action == "allocate":
        blocks = [bytearray(1 << 20) for _ in range(message["megabytes"])]
        return {"allocated": len(blocks)}
    elif action == "print":
        print("stray output on stdout")
    return {"pid": os.getpid(), "jobs": _seen["jobs"], "echo": message.get("echo")}
