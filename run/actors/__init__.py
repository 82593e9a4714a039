"""Where the roles play: Ray actors or hosts in this process, what they ask for, and the pools that call them.

======================= ===========================================================
:mod:`.start`           the one path that starts a run's role actors (Ray, or in process)
:mod:`.hosts`           a role inside a Ray actor, one host per kind
:mod:`.inprocess`       hosts in this process, called as Ray actors are
:mod:`.pool`            the actors of one role and the one retry policy
:mod:`.resources`       what each role's actors ask Ray for, and where they go
:mod:`.capacity`        how many actors a cluster can hold, checked before any starts
:mod:`.connection`      joining Ray: a cluster at an address, or a local one
======================= ===========================================================
"""
