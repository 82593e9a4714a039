"""The trainer hand-off: batches out to a trainer, policies back, rollouts in; a floor of its own.

The protocol (:mod:`.batches`: the batch and announcement records) and the
trainer's side of it (:mod:`.consumer`) import nothing else of
:mod:`coevo.run`, so a trainer (``coevo train`` in :mod:`coevo.run.train`,
or anyone's) depends on them and never on the loop; an import contract in
``pyproject.toml`` says so.

=========================== =======================================================
:mod:`.batches`             the records: the training batch (``coevo.batch/1``) and an announcement (``coevo.policy/1``)
:mod:`.transports`          the loop's side: the folder and Ray-queue transports, :class:`~.transports.Handoff`
:mod:`.consumer`            a trainer's side: every batch once, in order, each policy announced
:mod:`.inbox`               rollouts an external trainer drove, replayed, verified and logged
:mod:`.reference_trainer`   the smallest consumer (``coevo reference-trainer``)
=========================== =======================================================
"""
