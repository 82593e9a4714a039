"""coevo.curricula: what the Solver trains on next.

* :mod:`~coevo.curricula.base`: the curriculum contract and the state every curriculum keeps;
* one module per curriculum (:mod:`~coevo.curricula.uniform`, the template;
  :mod:`~coevo.curricula.plr`, :mod:`~coevo.curricula.accel`, :mod:`~coevo.curricula.target_band`);
* :mod:`~coevo.curricula.registry`: curricula by name, built-ins and ``coevo.curricula`` plugins;
* :mod:`~coevo.curricula.scorers`, :mod:`~coevo.curricula.rebuild` (the curriculum from the log alone),
  :mod:`~coevo.curricula.conformance` (``check_curriculum``);

The analysis of game logs (metrics, lineage, reports, exports) reads the log
only, so it lives with the log on the bottom floor: :mod:`coevo.arena.analysis`.
"""
