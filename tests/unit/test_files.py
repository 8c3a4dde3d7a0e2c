"""Reading YAML and JSON files: a document nested very deep is a clear error naming its file,
wherever clueue reads one (snapshot files, standard input, Configuration files, policy test
files), not a RecursionError traceback or a crash of libyaml's loader."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clueue.adapters.files import load_config, load_snapshot, read_documents
from clueue.engine import SnapshotError, load_policy, run_cycle
from clueue.engine.config import Limits, PodGroups
from clueue.engine.objects import LabelSelector
from clueue.engine.parsing import MAX_DEPTH, parse_documents
from clueue.policytools import PolicyTestError, load_tests

CLUSTER = Path(__file__).resolve().parents[2] / "examples" / "cluster"
DEEP = 100_000

NESTED = {
    "json": "[" * DEEP + "]" * DEEP,
    "json-object": '{"a":' * DEEP + "1" + "}" * DEEP,
    "yaml-flow": "items: " + "[" * DEEP + "]" * DEEP + "\n",
    "yaml-block": "- " * DEEP + "x\n",  # block sequences, each the first item of the one before
    "yaml-indented": "".join(" " * i + "a:\n" for i in range(2000)),  # 2 MB: indentation grows with depth
}


@pytest.mark.parametrize("name", NESTED)
def test_a_file_nested_100000_deep_is_an_error_naming_it(tmp_path, name):
    f = tmp_path / f"{name}.{'json' if name.startswith('json') else 'yaml'}"
    f.write_text(NESTED[name])
    with pytest.raises(SnapshotError, match=f"^{f}: nested deeper than {MAX_DEPTH} levels$"):
        read_documents([str(f)])


def test_a_value_at_the_deepest_level_allowed_loads_and_one_deeper_does_not():
    def nested(depth: int) -> str:  # a mapping, lists inside it, a number inside them: depth values on a path
        return "a: " + "[" * (depth - 2) + "1" + "]" * (depth - 2) + "\n"
    [body] = parse_documents(nested(MAX_DEPTH), "ok.yaml")
    value, depth = body, 1
    while not isinstance(value, int):
        value, depth = (value["a"] if isinstance(value, dict) else value[0]), depth + 1
    assert depth == MAX_DEPTH
    with pytest.raises(SnapshotError, match="nested deeper than"):
        parse_documents(nested(MAX_DEPTH + 1), "deep.yaml")


@pytest.mark.parametrize("name", ["json", "yaml-block"])
def test_standard_input_nested_deep_fails_cleanly(name):
    done = subprocess.run([sys.executable, "-m", "clueue.adapters.cli", "plan", "-"], input=NESTED[name],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr == f"error: <stdin>: nested deeper than {MAX_DEPTH} levels\n"


def test_a_configuration_file_nested_deep_is_an_error_naming_it(tmp_path):
    f = tmp_path / "config.yaml"
    f.write_text("kind: Configuration\nsolver: " + "[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(SnapshotError, match=f"^{f}: nested deeper than {MAX_DEPTH} levels$"):
        load_config(str(f))


def test_a_policy_test_file_nested_deep_is_an_error_naming_it(tmp_path):
    f = tmp_path / "deep_test.yaml"
    f.write_text("kind: PolicyTest\ncases:\n- name: deep\n  objects: " + "[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(PolicyTestError, match=f"^{f}: nested deeper than {MAX_DEPTH} levels$"):
        load_tests([f], read_documents=read_documents)


def test_a_number_too_long_for_python_is_an_error_naming_the_file(tmp_path):
    f = tmp_path / "long.json"
    f.write_text('{"kind": "ClusterQueue", "n": ' + "9" * 5000 + "}")
    with pytest.raises(SnapshotError, match=f"^{f}: not valid YAML or JSON: .*digits"):
        read_documents([str(f)])


def test_a_configuration_sets_the_limits_of_a_cycle(tmp_path):
    f = tmp_path / "config.yaml"
    f.write_text("kind: Configuration\nlimits:\n  seconds: 30\n  memoryMiB: 0\n")
    assert load_config(str(f)).limits == Limits(seconds=30.0, memory_mib=None)
    assert load_config(None).limits == Limits(seconds=None, memory_mib=2048)


def test_a_configuration_sets_how_podgroups_without_a_queue_are_scheduled(tmp_path):
    f = tmp_path / "config.yaml"
    f.write_text("kind: Configuration\npodGroups:\n  gangScheduleWithoutQueue: false\n"
                 "  podSelector: {matchLabels: {team: a}}\n")
    config = load_config(str(f))
    assert config.pod_groups == PodGroups(False, LabelSelector(match_labels=(("team", "a"),)))
    assert load_config(None).pod_groups == PodGroups(True, LabelSelector())


@pytest.mark.parametrize("text, field", [
    ("podGroups: {gangScheduleWithoutQueue: maybe}", "podGroups.gangScheduleWithoutQueue: expected true or false"),
    ("podGroups: [on]", "podGroups: expected an object"),
    ("podGroups: {podSelector: all}", "podGroups.podSelector: expected a label selector"),
])
def test_an_invalid_podgroups_section_names_the_field(tmp_path, text, field):
    f = tmp_path / "config.yaml"
    f.write_text(f"kind: Configuration\n{text}\n")
    with pytest.raises(SnapshotError, match=field):
        load_config(str(f))


@pytest.mark.parametrize("field, value", [("seconds", "-1"), ("seconds", "soon"), ("memoryMiB", "1.5"), ("memoryMiB", "-2")])
def test_invalid_limits_name_the_field(tmp_path, field, value):
    f = tmp_path / "config.yaml"
    f.write_text(f"kind: Configuration\nlimits:\n  {field}: {value}\n")
    with pytest.raises(SnapshotError, match=f"limits.{field}: expected"):
        load_config(str(f))


@pytest.mark.parametrize("value", ["on\0demand", "on\ud800demand"])
def test_a_text_clingo_cannot_read_is_an_error_naming_its_fact(tmp_path, value):
    # A NUL character (YAML "\0", JSON "\u0000") or a lone surrogate (JSON "\ud800") reaches a fact.
    snapshot = tmp_path / "cluster"
    shutil.copytree(CLUSTER, snapshot)
    flavors = [d.body for d in read_documents([str(snapshot / "10-flavors.yaml")])]
    flavors[0]["spec"]["nodeLabels"] = {"capacity": value}
    (snapshot / "10-flavors.yaml").unlink()
    (snapshot / "10-flavors.json").write_text(json.dumps(flavors))
    name = flavors[0]["metadata"]["name"]
    with pytest.raises(SnapshotError, match=rf'^clingo cannot read a text of the snapshot .*flavor_label\("{name}","capacity"'):
        run_cycle(load_snapshot([str(snapshot)]), load_policy())


@pytest.mark.parametrize("text, message", [
    ("hello\n", "expected one document of kind Configuration"),
    ("- kind: Configuration\n", "expected one document of kind Configuration"),
    ("kind: Configuration\npodIntegration: {managedOwners: [1]}\n", r"podIntegration.managedOwners\[0\]: expected a group/Kind string"),
])
def test_a_configuration_that_is_not_one_is_an_error_naming_the_file(tmp_path, text, message):
    f = tmp_path / "config.yaml"
    f.write_text(text)
    with pytest.raises(SnapshotError, match=message) as caught:
        load_config(str(f))
    assert str(f) in str(caught.value)
