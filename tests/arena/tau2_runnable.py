"""A small τ²-format checkout whose tool code runs: a made-up "kiosk" domain, written for coevo's tests.

Its layout and the shape of its code follow τ²-bench's (``src/tau2/`` with
``environment/toolkit.py`` and ``domains/kiosk/{tools,data_model}.py``;
``data/tau2/domains/kiosk/{db.json,tasks.json,policy.md}``), so coevo's
``tau2`` runtime loads it as it loads the real package. The package's
top-level ``__init__`` raises, as a stand-in for the real one's heavy
imports: the runtime must not run it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

INIT = 'raise ImportError("tau2/__init__ pulls in the LLM stack; the runtime must not run it")\n'

TOOLKIT = """\
from enum import Enum


class ToolType(str, Enum):
    READ = "read"
    WRITE = "write"


def is_tool(tool_type=ToolType.READ):
    def mark(func):
        func.__tool__ = tool_type
        return func

    return mark


class ToolKitBase:
    def __init__(self, db):
        self.db = db

    def use_tool(self, name, **kwargs):
        method = getattr(type(self), name, None)
        if method is None or not hasattr(method, "__tool__"):
            raise ValueError(f"Tool '{name}' not found.")
        return method(self, **kwargs)
"""

DB_PY = """\
from pydantic import BaseModel


class DB(BaseModel):
    pass
"""

DATA_MODEL = """\
from typing import Dict, List

from pydantic import BaseModel

from tau2.environment.db import DB


class Order(BaseModel):
    order_id: str
    status: str
    items: List[str]
    note: str = ""


class KioskDB(DB):
    orders: Dict[str, Order]
    credit: Dict[str, int]
"""

TOOLS = '''\
from typing import List

from tau2.domains.kiosk.data_model import KioskDB, Order
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool


class KioskTools(ToolKitBase):
    """The kiosk's tools."""

    db: KioskDB

    @is_tool(ToolType.READ)
    def get_order(self, order_id: str) -> Order:
        """Get an order.

        Args:
            order_id: The order id, such as '#K1'.
        """
        if order_id not in self.db.orders:
            raise ValueError("Order not found")
        return self.db.orders[order_id]

    @is_tool(ToolType.WRITE)
    def cancel_order(self, order_id: str) -> Order:
        """Cancel a pending order.

        Args:
            order_id: The order id.
        """
        order = self.get_order(order_id)
        if order.status != "pending":
            raise ValueError("Non-pending order cannot be cancelled")
        order.status = "cancelled"
        return order

    @is_tool(ToolType.WRITE)
    def refund(self, user: str, amount: int) -> int:
        """Credit a user.

        Args:
            user: Who.
            amount: How much, at most 50.
        """
        if amount > 50:
            raise ValueError("Refunds above 50 need a manager")
        self.db.credit[user] = self.db.credit.get(user, 0) + amount
        return self.db.credit[user]

    @is_tool(ToolType.WRITE)
    def add_items(self, order_id: str, items: List[str]) -> Order:
        """Add items to a pending order.

        Args:
            order_id: The order id.
            items: The items to add.
        """
        order = self.get_order(order_id)
        order.items = order.items + list(items)
        return order
'''

DB = {
    "orders": {
        "#K1": {"order_id": "#K1", "status": "pending", "items": ["tea"]},
        "#K2": {"order_id": "#K2", "status": "delivered", "items": ["cake", "tea"]},
    },
    "credit": {"ana": 10},
}


def _task(
    task_id: str, actions: list[tuple[str, dict[str, Any]]], **criteria: Any
) -> dict[str, Any]:
    return {
        "id": task_id,
        "user_scenario": {
            "persona": None,
            "instructions": {
                "domain": "kiosk",
                "reason_for_call": f"scenario {task_id}",
                "known_info": "You are Ana.",
                "task_instructions": "Be brief.",
            },
        },
        "evaluation_criteria": {
            "actions": [
                {"action_id": f"{task_id}_{i}", "name": name, "arguments": args}
                for i, (name, args) in enumerate(actions)
            ],
            "reward_basis": criteria.pop("reward_basis", ["DB", "COMMUNICATE"]),
            **criteria,
        },
    }


TASKS = [
    # a real write: doing nothing fails
    _task("0", [("get_order", {"order_id": "#K1"}), ("cancel_order", {"order_id": "#K1"})]),
    # reads only: doing nothing passes the DB check and the reward
    _task("1", [("get_order", {"order_id": "#K2"})]),
    # reads only, but the agent must say something: doing nothing passes the DB check only
    _task("2", [("get_order", {"order_id": "#K2"})], communicate_info=["cake"]),
    # the only write fails (as retail's task 105): statically a write, but by replay doing nothing passes
    _task("3", [("refund", {"user": "ana", "amount": 80})]),
    # an LLM-judged assertion gates the reward: undecided
    _task(
        "4",
        [("get_order", {"order_id": "#K1"})],
        reward_basis=["DB", "NL_ASSERTION"],
        nl_assertions=["Agent is polite."],
    ),
    # two writes where the second changes nothing the first did not: a partial solution earns 1
    _task(
        "5",
        [("refund", {"user": "ana", "amount": 5}), ("add_items", {"order_id": "#K1", "items": []})],
    ),
]


def build_runnable_checkout(root: Path) -> Path:
    """Write the checkout under ``root``; returns ``root`` (its ``src`` is the code to put on a path)."""
    files = {
        "src/tau2/__init__.py": INIT,
        "src/tau2/environment/__init__.py": "",
        "src/tau2/environment/toolkit.py": TOOLKIT,
        "src/tau2/environment/db.py": DB_PY,
        "src/tau2/domains/__init__.py": "",
        "src/tau2/domains/kiosk/__init__.py": "",
        "src/tau2/domains/kiosk/data_model.py": DATA_MODEL,
        "src/tau2/domains/kiosk/tools.py": TOOLS,
        "data/tau2/domains/kiosk/db.json": json.dumps(DB, indent=1),
        "data/tau2/domains/kiosk/tasks.json": json.dumps(TASKS, indent=1),
        "data/tau2/domains/kiosk/policy.md": "# Kiosk policy\nCancel only pending orders.\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
