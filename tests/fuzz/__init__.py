"""Property-based fuzz tests (Hypothesis) of the engine over generated snapshots and policies.

What they assert, for every generated input (``properties.py``):

1. a cycle gives a plan or raises a ``ClueueError``, never another exception, and answers
   within a hard wall-clock limit (it runs in a child process; a hang is a failure);
2. no node of a quota tree (ClusterQueue or cohort) is over its quota once the plan's
   admissions are added to what was admitted before, computed exactly from the snapshot's
   quantities and the semantics of docs/semantics.md (lending and borrowing limits,
   hierarchical cohorts);
3. no ``ungate`` without an admission: every ungated pod belongs to an admitted workload and
   gets a node selector with the node labels of the flavors its pod set is admitted in.

``test_snapshots.py`` generates snapshots (``strategies.py``: raw documents of every kind clueue
reads, mostly valid, some with odd quantities, wrong types and missing references);
``test_policies.py`` generates user policy files and runs them as ``clueue plan --policy`` does;
``test_session.py`` checks that a ``Session`` over successive snapshots of one cluster decides
each cycle as ``run_cycle`` does; ``test_corpus.py`` replays every failure found so far
(``corpus/``).

Budget: the default Hypothesis profile ``ci`` is deterministic (``derandomize``) with a fixed
number of examples (100 a test, about four minutes of CPU in all). ``HYPOTHESIS_PROFILE=long`` searches
randomly with 3,000 examples per test and keeps its example database in
``/tmp/clueue-hypothesis`` (never in the repository)::

    HYPOTHESIS_PROFILE=long python3 -m pytest tests/fuzz -x

A failure is written as a ready corpus case to ``/tmp/clueue-fuzz-failures/`` (or
``$CLUEUE_FUZZ_FAILURES``). To keep it: minimize it, give it a name, head it with a comment
saying what it found and where it was fixed, and move it to ``corpus/``::

    python3 -m tests.fuzz.minimize /tmp/clueue-fuzz-failures/FuzzFailure_hang.yaml my-case
"""
