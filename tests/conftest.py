import sys
from pathlib import Path

# Tests import their builders as `tests.builders`; make the checkout importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
