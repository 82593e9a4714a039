"""Example tasks shipped with coevo: ``examples.jsonl`` (retail, clinic, HR and payroll)."""
