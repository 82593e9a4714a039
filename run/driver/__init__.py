"""A driver's life around the loop: preflight and lock, stopping, failures counted, what the user sees.

======================= ===========================================================
:mod:`.driving`         one path for a run, a benchmark run and a corpus build: preflight, the lock, Ray
:mod:`.stopping`        SIGTERM: a run stops at a commit boundary
:mod:`.failures`        role calls and their failures, tallied per generation and per run
:mod:`.display`         the live table and ``events.jsonl``
:mod:`.columns`         the live table's columns and what each means
:mod:`.summary`         the figures a run ends with, and the lines that show them
:mod:`.progress`        the progress bar of long commands
======================= ===========================================================
"""
