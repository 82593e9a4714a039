"""A small τ²-format checkout (a made-up "shop" domain) for the τ² reader's tests.

Written for coevo, in τ²-bench's layout and file formats: ``data/tau2/domains/<d>/``
(``db.json`` or ``db.toml``, ``tasks.json``, ``policy.md`` or ``main_policy.md``,
``split_tasks.json``) and ``src/tau2/domains/<d>/`` (``tools.py``, ``user_tools.py``,
``data_model.py``). The tools file is only ever parsed: its first statement
raises, so running it would fail loudly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

TOOLS_PY = '''\
"""Toolkit of the shop domain (fixture)."""

raise RuntimeError("this file is data: it must never be imported or run")

from typing import Dict, List, Literal, Optional

from tau2.domains.shop.data_model import LineItem, Order, SearchMode, Status
from tau2.environment.toolkit import ToolKitBase, ToolType, is_discoverable_tool, is_tool

Reason = Literal["no longer needed", "ordered by mistake"]


class ShopTools(ToolKitBase):
    """The agent's tools."""

    def _get_order(self, order_id: str) -> Order:
        return self.db.orders[order_id]

    @is_tool(ToolType.READ)
    def get_order(self, order_id: str) -> Order:
        """Get the details of an order.

        Args:
            order_id: The order id, such as '#W0001'.

        Returns:
            Order: The order.

        Raises:
            ValueError: If the order is not found.
        """
        return self._get_order(order_id)

    @is_tool(ToolType.WRITE)
    def cancel_order(self, order_id: str, reason: Reason) -> Order:
        """Cancel a pending order.
        The user must confirm first.

        Args:
            order_id: The order id.
            reason: Why: 'no longer needed' or
                'ordered by mistake'.
        """
        order = self._get_order(order_id)
        order.status = "cancelled"
        return order

    @is_tool(ToolType.WRITE, mutates_state=False)
    def flag_order(self, order_id: str) -> str:
        """Flag an order for review (recorded elsewhere; the database does not change)."""
        return "flagged"

    @is_tool(ToolType.GENERIC, mutates_state=True)
    def unlock_feature(self, feature: str) -> str:
        """Unlock a feature for this conversation."""
        self.db.unlocked.append(feature)
        return "ok"

    @is_tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:
        """Transfer the user to a human agent.

        Args:
            summary: A summary of the user's issue.
        """
        return "Transfer successful"

    @is_tool(ToolType.THINK)
    def think(self, thought: str) -> str:
        """Think out loud; nothing changes.

        Args:
            thought: The thought.
        """
        return ""

    @is_tool(tool_type=ToolType.READ)
    def search(
        self,
        query: str,
        limit: int = 10,
        tags: list[str] | None = None,
        exact: bool = False,
        min_price: Optional[float] = None,
        mode: SearchMode = "fast",
        status: Status = Status.PENDING,
        weights: Dict[str, float] = None,
    ) -> List[Order]:
        """Search orders.

        Args:
            query (str): Words to look for.
            limit: At most this many results.
            tags: Only orders with all these tags.
            exact: Match whole words only.
            min_price: The lowest price.
            mode: How hard to look.
            status: Only orders in this status.
            weights: A weight per field.
        """
        return []

    @is_tool()
    def list_categories(self) -> list[str]:
        """List the product categories."""
        return []

    @is_tool(ToolType.WRITE)
    def place_order(
        self, items: List[LineItem], payment: LineItem | dict, note: "Optional[str]" = None, express: bool = False
    ) -> Order:
        """Place an order.

        Args:
            items: The items to buy.
            payment: The payment method.
            note: A note for the courier.
            express: Ship express.
        """
        return Order()

    @is_discoverable_tool(ToolType.WRITE)
    def refund_4821(self, order_id: str, amount: float) -> str:
        """Refund part of an order (unlocked by the knowledge base).

        Args:
            order_id: The order id.
            amount: The amount to refund.
        """
        return "refunded"

    # @is_tool(ToolType.THINK)
    def scratch(self, text: str) -> str:
        """Not a tool: its decorator is commented out."""
        return text

    def assert_order_status(self, order_id: str, expected_status: str) -> bool:
        """Not a tool: an env-assertion helper."""
        return self._get_order(order_id).status == expected_status
'''

USER_TOOLS_PY = '''\
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool


class ShopUserTools(ToolKitBase):
    @is_tool(ToolType.READ)
    def check_inbox(self) -> list[str]:
        """Read the user's inbox."""
        return []

    @is_tool(ToolType.WRITE)
    def pay_bill(self, bill_id: str) -> str:
        """Pay a bill from the user's phone.

        Args:
            bill_id: The bill to pay.
        """
        return "paid"

    def set_user_info(self, name: str) -> None:
        """Not a tool: an initialisation helper."""
'''

DATA_MODEL_PY = """\
from enum import Enum
from typing import Literal

from pydantic import BaseModel

SearchMode = Literal["fast", "thorough"]


class Status(str, Enum):
    PENDING = "pending"
    CANCELLED = "cancelled"


class LineItem(BaseModel):
    item_id: str
    quantity: int


class Order(BaseModel):
    order_id: str = ""
    status: Status = Status.PENDING
"""

DB = {
    "orders": {
        "#W0001": {
            "order_id": "#W0001",
            "status": "pending",
            "items": [{"item_id": "i1", "quantity": 2}],
        },
        "#W0002": {"order_id": "#W0002", "status": "delivered", "items": []},
    },
    "unlocked": [],
}

DB_TOML = """\
unlocked = []

[[orders]]
order_id = "#W0001"
status = "pending"

[[orders]]
order_id = "#W0002"
status = "delivered"
"""

USER_DB_TOML = """\
[device]
airplane_mode = false
"""

STRUCTURED = {
    "domain": "shop",
    "reason_for_call": "You want to cancel an order.",
    "known_info": "Your order is #W0001.",
    "unknown_info": None,
    "task_instructions": "Cancel it because you no longer need it.",
}


def _task(task_id: str, criteria: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "id": task_id,
        "description": {"purpose": f"fixture task {task_id}"},
        "user_scenario": {"persona": None, "instructions": STRUCTURED},
        "initial_state": None,
        "evaluation_criteria": criteria,
    }
    task.update(extra)
    return task


def _action(
    action_id: str,
    name: str,
    requestor: str = "assistant",
    compare_args: list[str] | None = None,
    **arguments: Any,
) -> dict[str, Any]:
    return {
        "action_id": action_id,
        "requestor": requestor,
        "name": name,
        "arguments": arguments,
        "info": None,
        "compare_args": compare_args,
    }


TASKS: list[dict[str, Any]] = [
    # "0": the default basis (no reward_basis key), only reads: a do-nothing agent passes
    _task(
        "0",
        {
            "actions": [_action("0_0", "get_order", order_id="#W0001")],
            "communicate_info": [],
            "nl_assertions": ["The agent greets."],
        },
        annotations=None,
    ),
    # "1": a gold write and a string to say: fails on both
    _task(
        "1",
        {
            "actions": [
                _action("1_0", "get_order", order_id="#W0001"),
                _action("1_1", "cancel_order", order_id="#W0001", reason="no longer needed"),
            ],
            "communicate_info": ["42"],
            "nl_assertions": None,
            "reward_basis": ["DB", "COMMUNICATE"],
        },
    ),
    # "2": no gold actions, an NL assertion gates: DB passes, the rest needs a judge
    _task(
        "2",
        {
            "actions": [],
            "communicate_info": [],
            "nl_assertions": ["The agent refuses."],
            "reward_basis": ["DB", "NL_ASSERTION"],
        },
    ),
    # "3": a WRITE tool that does not mutate state, and a transfer: DB passes
    _task(
        "3",
        {
            "actions": [
                _action("3_0", "flag_order", order_id="#W0002"),
                _action("3_1", "transfer_to_human_agents", summary="x"),
            ],
            "reward_basis": ["DB"],
        },
    ),
    # "4": telecom-like: plain-text instructions, init actions, env assertions, a user-side gold write
    _task(
        "4",
        {
            "actions": [
                _action("4_0", "pay_bill", requestor="user", bill_id="B1"),
                _action("4_1", "transfer_to_human_agents", compare_args=[], summary="locked"),
            ],
            "env_assertions": [
                {
                    "env_type": "assistant",
                    "func_name": "assert_order_status",
                    "arguments": {"order_id": "#W0001", "expected_status": "pending"},
                }
            ],
            "reward_basis": ["ENV_ASSERTION", "ACTION"],
        },
        user_scenario={"persona": "Terse.", "instructions": "Your phone is locked. Ask for help."},
        initial_state={
            "initialization_data": {"agent_data": {"unlocked": ["beta"]}, "user_data": None},
            "initialization_actions": [
                {"env_type": "user", "func_name": "set_user_info", "arguments": {"name": "Ann"}}
            ],
            "message_history": None,
        },
    ),
    # "5": no actions and no env assertions (τ²'s DB shortcut), a GENERIC tool that mutates, a greeting word
    _task(
        "5",
        {
            "actions": None,
            "env_assertions": None,
            "communicate_info": ["HELP"],
            "reward_basis": ["DB", "COMMUNICATE"],
        },
        ticket="Solo mode ticket.",
    ),
    # "6": a GENERIC tool with mutates_state=True, ACTION gates
    _task(
        "6",
        {
            "actions": [_action("6_0", "unlock_feature", feature="beta")],
            "reward_basis": ["DB", "ACTION"],
        },
    ),
    # "7": a gold action naming no tool the reader found
    _task(
        "7",
        {
            "actions": [_action("7_0", "KB_search", query="fees")],
            "reward_basis": ["DB", "COMMUNICATE"],
        },
    ),
]

SPLITS = {"base": [t["id"] for t in TASKS], "train": ["0", "1", "2"], "test": ["3", "4"]}

Layout = Literal["checkout", "site-packages"]


def build_tau2_checkout(
    root: Path,
    *,
    domain: str = "shop",
    db_format: Literal["json", "toml"] = "json",
    policy_name: str = "policy.md",
    layout: Layout = "checkout",
    tasks: list[dict[str, Any]] | None = None,
) -> Path:
    """Write a τ²-format domain under ``root`` and return ``root`` (what ``read_domain`` is given).

    ``layout="checkout"`` writes ``data/tau2/domains`` and ``src/tau2/domains``;
    ``"site-packages"`` writes ``tau2/data/tau2/domains`` and ``tau2/domains``,
    as an installed ``tau2`` lays them out. ``db_format="toml"`` also writes a
    ``user_db.toml``, as telecom has.
    """
    data_part, code_part = (
        ("data/tau2/domains", "src/tau2/domains")
        if layout == "checkout"
        else ("tau2/data/tau2/domains", "tau2/domains")
    )
    data = root / data_part / domain
    code = root / code_part / domain
    data.mkdir(parents=True, exist_ok=True)
    code.mkdir(parents=True, exist_ok=True)
    if db_format == "json":
        (data / "db.json").write_text(json.dumps(DB, indent=2))
    else:
        (data / "db.toml").write_text(DB_TOML)
        (data / "user_db.toml").write_text(USER_DB_TOML)
    (data / "tasks.json").write_text(json.dumps(TASKS if tasks is None else tasks, indent=2))
    (data / "split_tasks.json").write_text(json.dumps(SPLITS))
    (data / policy_name).write_text("# Shop policy\n\nBe kind. Confirm before writing.\n")
    (code / "tools.py").write_text(TOOLS_PY)
    (code / "user_tools.py").write_text(USER_TOOLS_PY)
    (code / "data_model.py").write_text(DATA_MODEL_PY)
    return root
