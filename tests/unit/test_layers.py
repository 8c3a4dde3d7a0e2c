"""clueue's layers hold (the import-linter contracts in pyproject.toml, docs/architecture.md)."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_import_contracts_hold():
    # Run by this Python, so that the clueue checked is the one under test (a `lint-imports`
    # script of another environment would import that environment's clueue).
    proc = subprocess.run([sys.executable, "-c", _LINT], cwd=ROOT, capture_output=True, text=True)
    assert "No module named 'importlinter'" not in proc.stderr, "import-linter is a test dependency (pip install -e '.[test]')"
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_adapter_has_its_layer():
    """A new module or package under adapters/ is placed in the stack, not left unchecked."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    stack = next(c for c in config["contracts"] if c["type"] == "layers")
    named = {m.strip() for layer in stack["layers"] for m in layer.split("|")}
    adapters = {f"clueue.adapters.{p.stem}" for p in (ROOT / "adapters").iterdir()
                if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert adapters - named == set()


def test_policy_files_hold_no_code():
    for lp in (ROOT / "policies").glob("*.lp"):
        text = lp.read_text()
        assert "#script" not in text and "#include" not in text, lp
