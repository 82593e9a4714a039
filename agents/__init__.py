"""coevo.agents: the roles — Synthesizer, Solver, Judge, World model — their protocols and registry.

The role protocols, the registry (entry-point group ``coevo.roles``) and the
built-in offline and Claude implementations land with the roles issue; the
Judge's mechanical checks they build on live in :mod:`coevo.arena.judge`.
"""
