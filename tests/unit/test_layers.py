"""The engine stays pure and only one module imports clingo (contracts in pyproject.toml)."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    lint = shutil.which("lint-imports")
    assert lint, "import-linter is a test dependency (pip install -e '.[test]')"
    proc = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_policy_files_hold_no_code():
    for lp in (ROOT / "policies").glob("*.lp"):
        text = lp.read_text()
        assert "#script" not in text and "#include" not in text, lp
