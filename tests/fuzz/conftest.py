"""Hypothesis profiles of the fuzz tests (see ``tests/fuzz/__init__.py``): ``ci``, the default, a
fixed and deterministic budget; ``long`` (``HYPOTHESIS_PROFILE=long``), a randomized search for
local runs. Neither writes an example database into the repository."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.database import DirectoryBasedExampleDatabase

# Hypothesis keeps its files (the example database, patches of failing examples) out of the repository.
set_hypothesis_home_dir(os.environ.get("CLUEUE_HYPOTHESIS_DIR", "/tmp/clueue-hypothesis"))

# No explain phase: it reruns every failing example many times, each up to the hard limit.
_COMMON = dict(deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], print_blob=True)

# ci: 100 examples a test. Each runs in a forked, limited child (about 1.3 CPU-s an example):
# 300 made the two snapshot properties alone 800 of the suite's CPU-seconds on two cores.
settings.register_profile("ci", max_examples=100, derandomize=True, database=None, **_COMMON)
settings.register_profile("long", max_examples=3000, derandomize=False,
                          database=DirectoryBasedExampleDatabase(os.path.join(os.environ.get("CLUEUE_HYPOTHESIS_DIR", "/tmp/clueue-hypothesis"), "examples")), **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
