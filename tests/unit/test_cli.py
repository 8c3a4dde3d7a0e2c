"""The command line as users run it, on the bundled example and on bad input."""

import json
import subprocess
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

from clueue.adapters.cli import main

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "cluster")


def invoke(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input)


def test_plan_text_on_the_bundled_example():
    result = invoke("plan", EXAMPLE)
    assert result.exit_code == 0, result.output
    assert "admitted" in result.output and "Actions" in result.output and "proven optimal" in result.output
    assert "research/sweep" in result.output and "3 of 4 pods" in result.output
    ungate = next(line for line in result.output.splitlines() if "ungate     research/llm-finetune-0" in line)
    assert "nodeSelector cloud.example/accelerator=nvidia-a100" in ungate
    assert "annotations kueue.x-k8s.io/role-hash=" in ungate  # what applying writes on the pod


def test_plan_json_and_yaml_carry_the_same_versioned_data():
    as_json = json.loads(invoke("plan", EXAMPLE, "-o", "json").output)
    as_yaml = yaml.safe_load(invoke("plan", EXAMPLE, "-o", "yaml").output)
    assert as_json["apiVersion"] == "clueue.dev/v1" and as_json["kind"] == "Plan"
    for data in (as_json, as_yaml):
        data.pop("solver")
    assert as_json == as_yaml
    states = {w["name"]: w["state"] for w in as_json["workloads"]}
    assert states["team-a/train-resnet"] == "admitted" and states["sandbox/pod-experiment"] == "inadmissible"
    assert {"kind": "delete-pod", "target": "team-a/train-resnet-4"}.items() <= next(
        a for a in as_json["actions"] if a["kind"] == "delete-pod").items()


def test_plan_says_when_a_cycle_needed_no_solve(tmp_path):
    # The queue's 4 CPUs are taken: the waiting workload cannot fit, and nothing preempts.
    from tests.builders import cluster_queue, flatten, flavor, local_queue, workload
    docs = flatten([flavor("od"), cluster_queue("cq", {"od": {"cpu": 4}}), local_queue("cq"),
                    workload("running", cpu=4, admitted_in=("cq", "od")), workload("waiting", cpu=2)])
    (tmp_path / "snap.yaml").write_text(yaml.safe_dump_all(docs))
    result = invoke("plan", str(tmp_path / "snap.yaml"))
    assert result.exit_code == 0, result.output
    assert "Solver: no solve needed (nothing pending fits, nothing may preempt)" in result.output
    assert "0 free in its nominal quota" in result.output  # why it waits, solved when printed


def test_plan_reads_stdin():
    text = "".join(p.read_text() + "\n---\n" for p in sorted(Path(EXAMPLE).glob("*.yaml")))
    result = invoke("plan", "-", "-o", "json", input=text)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["workloads"]) == 11


def test_explain_gives_reasons_with_numbers():
    result = invoke("explain", EXAMPLE, "team-a/pod-render-farm")
    assert result.exit_code == 0, result.output
    assert "[InsufficientQuota] needs 12 cpu in flavor on-demand of ClusterQueue team-a" in result.output
    assert "11 short" in result.output
    data = json.loads(invoke("explain", EXAMPLE, "pod-protein-fold", "-o", "json").output)
    assert data["state"] == "pending"
    short = next(r for r in data["reasons"] if r["code"] == "InsufficientQuota")
    assert short["details"]["short"] == "3" and short["details"]["resource"] == "nvidia.com/gpu"


def test_explain_unknown_workload_fails_clearly():
    result = invoke("explain", EXAMPLE, "nope")
    assert result.exit_code != 0 and "no single workload 'nope'" in result.output


def test_facts_prints_commented_sorted_facts():
    out = invoke("facts", EXAMPLE).output
    assert "% quota(N,F,R,Amount): Nominal quota" in out
    assert 'quota(cq("team-a"),"on-demand","cpu",8).' in out
    assert out == invoke("facts", EXAMPLE).output


def test_facts_reference_documents_every_predicate():
    from clueue.engine.facts import PREDICATES
    out = invoke("facts", "--reference").output
    assert all(f"## `{name}/{len(p.args)}`" in out for name, p in PREDICATES.items())


def test_bad_input_names_file_object_and_field_and_exits_nonzero(tmp_path):
    bad = tmp_path / "queues.yaml"
    bad.write_text("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: a}\nspec: {}\n")
    result = invoke("plan", str(bad))
    assert result.exit_code == 1
    assert f"{bad}#1: LocalQueue q: spec.clusterQueue" in result.output


def test_missing_path_and_forbidden_policy_fail_clearly(tmp_path):
    assert invoke("plan", str(tmp_path / "absent")).exit_code == 1
    evil = tmp_path / "evil.lp"
    evil.write_text('% harmless comment\n#script (python)\nimport os\n#end.\n')
    result = invoke("plan", EXAMPLE, "--policy", str(evil))
    assert result.exit_code == 1 and f"{evil}:2:1: forbidden: #script" in result.output


def test_the_installed_command_runs():
    proc = subprocess.run([sys.executable, "-m", "clueue.adapters.cli", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "plan" in proc.stdout


def test_crds_print_every_kind_clueue_reads():
    docs = [d for d in yaml.safe_load_all(invoke("crds").output) if d]
    kinds = {d["spec"]["names"]["kind"] for d in docs}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass", "Workload"} <= kinds
    assert all(d["kind"] == "CustomResourceDefinition" for d in docs)
