"""Offline Synthesizers: procedural domains, a miner for real SQLite databases, mutation operators."""
