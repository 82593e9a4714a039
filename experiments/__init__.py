"""The experiment files that ship with coevo (``coevo.experiments``: TOML data, no code).

``coevo run quickstart`` runs ``quickstart.toml`` from here by name, from any
folder; ``coevo examples`` lists them with their installed paths and
``coevo examples --copy quickstart DIR`` puts an editable copy in ``DIR``.
:func:`coevo.arena.examples.bundled` is the catalogue.
"""
