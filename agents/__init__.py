"""coevo.agents: the roles — Synthesizer, Solver, Judge, World model — their protocols and registry.

* :mod:`coevo.agents.protocols`: the four role protocols, the capabilities a role may add,
  ``ProposalRequest`` and ``LearnStats``;
* :mod:`coevo.agents.registry`: roles by name, built-ins and ``coevo.roles`` entry-point plugins;
* :mod:`coevo.agents.synthesizers`: the offline Synthesizers (procedural domains, the miner,
  mutation operators);
* :mod:`coevo.agents.judges`: the mechanical Judge role.

The conformance checker for any role is :func:`coevo.run.testing.check_role`.
"""
