"""One generation of the loop (:mod:`coevo.run.loop` runs them one after another): its phases and its commit.

======================= ===========================================================
:mod:`.state`           what a generation is made of while it runs: report, phases' results, clock
:mod:`.playing`         its episodes: chunks over the Solver pool, derived seeds and ids, dynamic sampling
:mod:`.overlap`         what runs beside solving when ``run.max_staleness`` ≥ 1
:mod:`.selfplay`        self-play's part: what each proposal earned, the novelty archive, the watch
:mod:`.suites`          further held-out suites (``[[eval.suites]]``), played beside the synthesized one
:mod:`.record`          the rows a generation commits to the game log
:mod:`.checkpoints`     what a run resumes from, and the older checkpoints pruned
======================= ===========================================================
"""
