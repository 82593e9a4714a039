"""Corpora at scale (``coevo corpus build``): worlds and tasks made across Ray workers, judged, deduplicated, sharded.

======================= ===========================================================
:mod:`.build`           the build: sources, workers, deduplication, shards
:mod:`.from_experiment` an experiment file's Synthesizer as a corpus source
======================= ===========================================================
"""
