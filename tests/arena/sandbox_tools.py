"""Tools that try to escape: run inside sandboxed workers as the top-level module ``sandbox_tools``.

The tests put this folder on the workers' import path (``WorkerPool(paths=...)``),
so it imports nothing from ``tests``.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

_seen = {"jobs": 0}


def job(message: dict[str, Any]) -> dict[str, Any]:
    """Do what ``message["do"]`` says; answer with the worker's pid, uid and how many jobs it has run."""
    _seen["jobs"] += 1
    action = message.get("do")
    if action == "read":
        with open(message["path"], "rb") as file:
            return {"read": len(file.read())}
    if action == "write":
        with open(message["path"], "w") as file:
            file.write(message.get("text", "escaped"))
        return {"wrote": message["path"]}
    if action == "connect":
        with socket.create_connection((message["host"], message["port"]), timeout=5):
            return {"connected": True}
    if action == "udp":
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.sendto(b"escaped", (message["host"], message["port"]))
        return {"sent": True}
    if action == "fork":
        return {"forked": _fork_bomb(message["children"])}
    if action == "allocate":
        return {"allocated": len(bytearray(message["bytes"]))}
    if action == "spin":
        while True:
            pass
    if action == "sleep":
        time.sleep(message["seconds"])
    if action == "box":
        with open("note.txt", "w") as file:
            file.write("kept in the box")
        with open(os.path.join(os.environ["TMPDIR"], "note.txt")) as file:
            return {"box": os.getcwd(), "text": file.read()}
    if action == "environ":
        return {"environ": sorted(os.environ)}
    if action == "import":
        __import__(message["module"])
    return {"pid": os.getpid(), "uid": os.getuid(), "jobs": _seen["jobs"]}


def _fork_bomb(children: int) -> int:
    """Fork up to ``children`` sleeping children; kill and reap them all; re-raise a refused fork."""
    pids: list[int] = []
    try:
        for _ in range(children):
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            pids.append(pid)
    finally:
        for pid in pids:
            os.kill(pid, 9)
        for pid in pids:
            os.waitpid(pid, 0)
    return len(pids)
