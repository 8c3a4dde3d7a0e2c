"""The decision log: every decision cycle recorded, queryable and replayable (docs/decision-log.md).

One module per job:

- :mod:`.config`: the Configuration's ``decisionLog`` section, and a Configuration as a document;
- :mod:`.units`: durations (``38m``, ``7d``) and sizes (``1Gi``);
- :mod:`.objects`: snapshot objects by content hash, compressed, hashed once per version;
- :mod:`.records`: a cycle's record and the workload states that changed;
- :mod:`.schema`: the SQLite tables and their version;
- :mod:`.store`: the SQLite store (one writer): write a cycle, read the history;
- :mod:`.retention`: delete what is older or beyond the size bound, and unreferenced objects;
- :mod:`.jsonlines`: the second sink, one JSON line per cycle;
- :mod:`.recorder`: what the controller, ``apply`` and ``plan --record`` call;
- :mod:`.replay`: rebuild a recorded cycle's snapshot, policy and Configuration, and decide it again;
- :mod:`.timeline`: a workload's states and reasons over time (``clueue audit why``).

Nothing is imported here, so that each user loads only what it needs.
"""
