"""Realisation: a :class:`~coevo.agents.synthesizers.planner.plan.Plan` turned into a ``coevo.task/1`` record.

The instruction, verifier (checks and frame), reference solution and features
are all derived from the plan and the world's initial state, never from
running the solution. A question's answer is checked by value where it is a
number (see :func:`_answer_check`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from typing import Any, Final

from coevo.agents.synthesizers.catalog import Action, Catalog, quote
from coevo.agents.synthesizers.planner.database import PlanningDb
from coevo.agents.synthesizers.planner.goals import (
    action_call,
    fill_template,
    frame_of,
    holds,
    merge_frames,
)
from coevo.agents.synthesizers.planner.plan import Plan, Unfit
from coevo.agents.synthesizers.planner.walk import Walk, features_of, follow
from coevo.arena.spec import (
    SUBMIT,
    CheckSpec,
    FrameColumns,
    Lineage,
    TaskSpec,
    ToolCall,
    VerifierSpec,
    WorldSpec,
)

__all__ = ["realize"]


def _quoted(choices: Mapping[str, Any]) -> dict[str, str]:
    """Choices as words (templates put quotes where the value is free text)."""
    return {name: str(value) for name, value in choices.items()}


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?")) else ".")


def realize(
    plan: Plan,
    catalog: Catalog,
    conn: sqlite3.Connection,
    world: WorldSpec,
    *,
    provenance: Mapping[str, Any] | None = None,
    lineage: Mapping[str, Any] | None = None,
    db: PlanningDb | None = None,
    walk: Walk | None = None,
) -> TaskSpec:
    """The task ``plan`` describes in ``world`` (whose initial state ``conn`` holds).

    ``db``: a shared reader of the same initial state (its answers are kept between calls);
    ``walk``: the plan's walk when the caller has already followed it.

    Raises:
        Unfit: the plan does not describe one well-defined task in this world
            (a pick is ambiguous, a precondition does not hold, ...).
    """
    db = db if db is not None else PlanningDb(conn, catalog, world)
    walk = walk if walk is not None else follow(plan, catalog, db)
    table, key_column = walk.table, db.key(walk.table)
    checks: list[CheckSpec] = []
    frames: list[dict[str, Any]] = []
    calls = list(walk.calls)
    if plan.family == "question":
        if len(plan.goal) != 1 or not 0 <= plan.goal[0] < len(catalog.attributes):
            raise Unfit("a question needs one attribute")
        attribute = catalog.attributes[plan.goal[0]]
        if attribute.table != table or len(walk.rows) != 1:
            raise Unfit(f"attribute {attribute.phrase!r} is not about {table}")
        key = walk.rows[0][key_column]
        value = db.value(
            f"SELECT ({attribute.expr}) FROM {quote(table)} WHERE {quote(key_column)} IS ?", (key,)
        )
        if value is None or isinstance(value, bytes) or str(value).strip() == "":
            raise Unfit(f"{attribute.phrase} is empty for this row")
        answer = str(value)
        if re.search(rf"(?<!\w){re.escape(answer.lower())}(?!\w)", walk.phrase.lower()):
            raise Unfit("the instruction already states the answer")
        if not db.value(
            f"SELECT lower(trim(?)) = lower((SELECT {attribute.expr} FROM {quote(table)} "
            f"WHERE {quote(key_column)} IS ?))",
            (answer, key),
        ):
            raise Unfit(f"{attribute.phrase} cannot be written as text that SQL compares equal")
        if answer != answer.strip():
            raise Unfit("the answer has surrounding spaces")
        target = walk.expr.format(db="initial.")
        expected = (
            f"(SELECT {attribute.expr} FROM initial.{quote(table)} "
            f"WHERE {quote(key_column)} = {target})"
        )
        checks.append(CheckSpec(name="answer", sql=_answer_check(value, expected)))
        calls.append(ToolCall(SUBMIT, {"answer": answer}))
        instruction = _sentence(
            f"What is {attribute.phrase} of {walk.phrase}? Answer with the value {attribute.hint}"
        )
    elif plan.family in ("action", "bulk"):
        if len(plan.goal) != 1 or not 0 <= plan.goal[0] < len(catalog.actions):
            raise Unfit("an action task needs one action")
        action = catalog.actions[plan.goal[0]]
        if action.table != table:
            raise Unfit(f"action {action.name} does not act on {table}")
        if plan.family == "bulk" and not action.bulk:
            raise Unfit(f"{action.name} cannot be asked for every row at once")
        if (plan.family == "bulk") != bool(walk.every_exprs):
            raise Unfit("a bulk task ends with a pick of every row, and only a bulk task does")
        targets = walk.every_exprs or [walk.expr]
        for n, (row, expr) in enumerate(zip(walk.rows, targets, strict=True)):
            key = row[key_column]
            if not holds(db, action, table, key, plan.choices):
                needs = fill_template(
                    action.when, target="", key=key, choices=plan.choices, db="", row={}
                )
                raise Unfit(f"{action.name} does not apply to this row (needs {needs})")
            calls.append(action_call(action, row, key, plan.choices, db))
            suffix = f"_{n + 1}" if len(targets) > 1 else ""
            checks.append(
                CheckSpec(
                    name=f"{action.name}{suffix}",
                    sql=fill_template(
                        action.check,
                        target=expr,
                        key=key,
                        choices=plan.choices,
                        db="initial.",
                        row=row,
                    ),
                )
            )
            frames.append(frame_of(action, key, plan.choices, row, db))
        instruction = _sentence(action.ask.format(target=walk.phrase, **_quoted(plan.choices)))
        calls.append(ToolCall(SUBMIT, {}))
    elif plan.family == "conditional":
        if len(plan.goal) != 2 or not all(0 <= g < len(catalog.actions) for g in plan.goal):
            raise Unfit("a conditional task needs a first-choice and a fallback action")
        first, fallback = (catalog.actions[g] for g in plan.goal)
        if first.table != table or fallback.table != table or len(walk.rows) != 1:
            raise Unfit("both actions of a conditional task act on the target's table")
        if not first.blocked or not fallback.instead:
            raise Unfit(f"{first.name} / {fallback.name} cannot be phrased as a condition")
        row = walk.rows[0]
        key = row[key_column]
        first_ok = holds(db, first, table, key, plan.choices)
        fallback_ok = holds(db, fallback, table, key, plan.choices)
        if first_ok == fallback_ok:
            raise Unfit("exactly one of the two actions must apply to the target")
        taken = first if first_ok else fallback
        calls.append(action_call(taken, row, key, plan.choices, db))
        frames.append(frame_of(taken, key, plan.choices, row, db))
        target = walk.expr.format(db="initial.")

        def check_of(action: Action) -> str:
            return fill_template(
                action.check,
                target=walk.expr,
                key=key,
                choices=plan.choices,
                db="initial.",
                row=row,
            )

        condition = fill_template(
            first.when, target=walk.expr, key=key, choices=plan.choices, db="initial.", row=row
        )
        checks.append(
            CheckSpec(
                name="done_as_asked",
                sql=(
                    f"SELECT CASE WHEN (SELECT ({condition}) FROM initial.{quote(table)} "
                    f"WHERE {quote(key_column)} = {target}) THEN ({check_of(first)}) "
                    f"ELSE ({check_of(fallback)}) END"
                ),
            )
        )
        words = _quoted(plan.choices)
        instruction = _sentence(
            f"{first.ask.format(target=walk.phrase, **words)}; "
            f"{first.blocked}, {fallback.instead.format(target='it', **words)}"
        )
        calls.append(ToolCall(SUBMIT, {}))
    else:
        raise Unfit(f"unknown family {plan.family!r}")
    features = features_of(walk, plan.family)
    verifier = VerifierSpec(
        checks=checks,
        frame={
            t: FrameColumns(**r) if isinstance(r, dict) else r
            for t, r in merge_frames(frames).items()
        },
    )
    return TaskSpec(
        world=world,
        instruction=instruction,
        verifier=verifier,
        solution=calls,
        features=features,
        lineage=Lineage(**(lineage or {})),
        provenance={**(provenance or {}), "plan": plan.to_json()},
    )


_DECIMAL: Final = re.compile(r"-?(?:0|[1-9]\d*)\.\d+")
"""Text that is a quantity written with a decimal point (money as the tools show it: ``123.45``)."""

# the submitted answer without spaces, a currency sign or thousands separators
_GIVEN: Final = "replace(replace(replace(trim(:answer), ' ', ''), '$', ''), ',', '')"


def _answer_check(value: Any, expected: str) -> str:
    """The check of a submitted answer against ``expected`` (SQL computing it from the initial state).

    ``value`` is the answer as stored (its type decides the comparison). Text
    compares ignoring case and surrounding spaces, so a code such as
    ``0417618938`` must be given as shown. A number (an INTEGER or REAL value,
    or text written as a decimal, like money ``123.45``) compares by value, so
    ``$1,234.50``, ``1234.5`` and ``1234.50`` are the same answer, while
    anything that is not one number (``"12 or 13"``, ``"-"``, ``""``, no
    answer) fails. Integers compare exactly, however large.
    """
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not numeric and not (isinstance(value, str) and _DECIMAL.fullmatch(value)):
        return f"SELECT lower(trim(:answer)) = lower({expected})"
    malformed = (
        f"{_GIVEN} NOT GLOB '*[0-9]*' OR {_GIVEN} GLOB '*[^0-9.-]*' "
        f"OR {_GIVEN} GLOB '*.*.*' OR {_GIVEN} GLOB '?*-*'"
    )
    if isinstance(value, int):
        equal = (
            f"CASE WHEN {_GIVEN} GLOB '*.*' THEN CAST({_GIVEN} AS REAL) = {expected} "
            f"ELSE CAST({_GIVEN} AS INTEGER) = {expected} END"
        )
    else:
        equal = f"CAST({_GIVEN} AS REAL) = CAST({expected} AS REAL)"
    return f"SELECT CASE WHEN {malformed} THEN 0 ELSE {equal} END"
