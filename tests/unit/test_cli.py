"""The command line as users run it, on the bundled example and on bad input."""

import json
import os
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
    # complete, its 4 pods of 2 GPUs would ask twice what research's quota tree holds
    assert "INADMISSIBLE research/sweep" in result.output and "at least 8 nvidia.com/gpu" in result.output
    ungate = next(line for line in result.output.splitlines() if "ungate     research/llm-finetune-0" in line)
    assert "nodeSelector cloud.example/accelerator=nvidia-a100" in ungate
    assert "annotations kueue.x-k8s.io/role-hash=" in ungate  # what applying writes on the pod
    assert "    delete-pod team-a/train-resnet-4 (group train-resnet declares 4 pods" in invoke(
        "explain", EXAMPLE, "team-a/train-resnet").output  # where the destructive action comes from


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
    # the shortfall counts back what lower-ranked workloads took only because this one did not fit
    assert "so it is 6 short once what workloads ranked after it took is given back" in result.output
    assert "[NeedsQuota] 6 more nominal cpu in flavor on-demand of ClusterQueue team-a (now 8) admits it; 5 more does not" in result.output
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


# --- kubectl's habits: where the cluster is found, what is shown, how errors read ---------------

def connecting(monkeypatch):
    """Record which cluster a command would connect to, without one: the connection fails naming it."""
    from clueue.engine import AdapterError

    def connect(kubeconfig=None, context=None, *, in_cluster=False):
        raise AdapterError(f"connect kubeconfig={kubeconfig} context={context} in_cluster={in_cluster}")
    monkeypatch.setattr("clueue.adapters.kube.connect", connect)


def run_with(env, *args):
    return CliRunner(env=env).invoke(main, list(args))


def kubeconfig_file(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("apiVersion: v1\nkind: Config\n")
    return str(path)


def test_without_path_the_cluster_is_found_as_kubectl_finds_it(tmp_path, monkeypatch):
    connecting(monkeypatch)
    home = tmp_path / "home"
    default = kubeconfig_file(home / ".kube" / "config")
    listed = kubeconfig_file(tmp_path / "b.yaml")
    given = kubeconfig_file(tmp_path / "given.yaml")
    # Without $KUBECONFIG, ~/.kube/config; every command that reads a cluster does the same.
    for command in ("plan", "apply", "snapshot"):
        result = run_with({"HOME": str(home), "KUBECONFIG": None}, command)
        assert result.exit_code == 1, result.output
        assert f"connect kubeconfig={default} context=None in_cluster=False" in result.stderr
    # $KUBECONFIG is a list of files (the kubernetes client merges them); ~/.kube/config is then not read.
    env = {"HOME": str(home), "KUBECONFIG": f"{tmp_path / 'absent.yaml'}{os.pathsep}{listed}"}
    assert f"kubeconfig={tmp_path / 'absent.yaml'}{os.pathsep}{listed} " in run_with(env, "plan").stderr
    assert f"kubeconfig={listed} context=None" not in run_with(env, "explain", "w").stderr
    # --kubeconfig beats $KUBECONFIG; --context is passed on.
    assert f"kubeconfig={given} context=dev " in run_with(env, "plan", "--kubeconfig", given, "--context", "dev").stderr
    assert "kubeconfig=None context=None in_cluster=True" in run_with(env, "apply", "--in-cluster").stderr


def test_snapshot_paths_are_read_whatever_kubeconfig_is_set(tmp_path, monkeypatch):
    connecting(monkeypatch)
    env = {"HOME": str(tmp_path), "KUBECONFIG": kubeconfig_file(tmp_path / "config")}
    result = run_with(env, "plan", EXAMPLE)
    assert result.exit_code == 0 and "connect" not in result.output and "Plan for 11 workloads" in result.output


def test_no_path_and_no_kubeconfig_is_a_usage_error_saying_what_to_give(tmp_path):
    env = {"HOME": str(tmp_path), "KUBECONFIG": None}
    for command in ("plan", "explain w", "apply", "snapshot"):
        result = run_with(env, *command.split())
        assert result.exit_code == 2, (command, result.output)
        assert result.stderr.startswith(f"error: no kubeconfig: $KUBECONFIG is not set and {tmp_path}/.kube/config "
                                        "does not exist; give ")
        assert ("snapshot PATHs, or --kubeconfig FILE" in result.stderr) == command.startswith(("plan", "explain"))
    result = run_with({"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "absent")}, "plan")
    assert result.exit_code == 2 and f"error: $KUBECONFIG ({tmp_path / 'absent'}) names no existing file" in result.stderr
    result = run_with(env, "plan", "--in-cluster", "--kubeconfig", "k")
    assert result.exit_code == 2 and "--in-cluster uses the pod's service account" in result.stderr


def test_click_errors_read_like_clueue_errors():
    cases = [("plan", "--bogus"), ("plan", EXAMPLE, "--time-budget", "0"), ("plan", EXAMPLE, "--kubeconfig", "k"),
             ("explain",), ("plan", EXAMPLE, "-o", "xml"), ("nope",), ("policy", "test", "--bogus")]
    for args in cases:
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        first, hint = result.stderr.splitlines()
        assert first.startswith("error: ") and first[7].islower(), first
        assert hint.startswith("See 'clueue") and hint.endswith(" --help' for usage."), hint
        assert "Error" not in result.output and "Usage:" not in result.output
    result = invoke("explain", EXAMPLE, "nope")  # a ClickException raised by a command: exit 1, same prefix
    assert result.exit_code == 1 and result.stderr.startswith("error: no single workload 'nope'")
    assert invoke("--help").exit_code == 0 and invoke("--version").exit_code == 0


def test_help_says_what_each_command_reads_and_writes():
    helps = {name: invoke(name, "--help").output for name in main.commands if name != "policy"}
    for name in ("plan", "explain"):
        assert "writes nothing" in helps[name] and "$KUBECONFIG, then ~/.kube/config" in helps[name]
    assert "read-only" not in helps["apply"]
    assert "Writes Workloads" in helps["apply"] and "Pods" in helps["apply"] and "Events" in helps["apply"]
    for name in ("snapshot", "crds", "facts", "bench", "bench-compare"):
        assert "standard output" in " ".join(helps[name].split()), name
    for name in ("check", "test", "diff"):
        assert "writes nothing but its report" in " ".join(invoke("policy", name, "--help").output.split()), name
    listing = " ".join(invoke("--help").output.split())
    assert "writes nothing" in listing and "write it to the cluster" in listing and "kube" in listing


def test_namespace_shows_its_workloads_and_their_actions_only():
    data = json.loads(invoke("plan", EXAMPLE, "-n", "team-a", "-o", "json").output)
    assert data["apiVersion"] == "clueue.dev/v1" and data["kind"] == "Plan"
    assert [w["name"] for w in data["workloads"]] == ["team-a/pod-etl-nightly", "team-a/pod-render-farm",
                                                      "team-a/train-resnet"]
    assert data["summary"] == {"admitted": 2, "pending": 1, "inadmissible": 0, "finished": 0}
    assert {a["workload"] for a in data["actions"]} == {"team-a/pod-etl-nightly", "team-a/train-resnet"}
    assert data["metadata"]["filter"] == {"namespace": "team-a", "workloads": 11}
    whole = json.loads(invoke("plan", EXAMPLE, "-A", "-o", "json").output)
    assert "filter" not in whole["metadata"] and len(whole["workloads"]) == 11
    # the cycle still decided over everything: team-a's quota lent to others is the same number
    assert data["workloads"][1]["reasons"] == next(w for w in whole["workloads"]
                                                   if w["name"] == "team-a/pod-render-farm")["reasons"]
    text = invoke("plan", EXAMPLE, "--namespace", "team-a").output
    assert text.startswith("Plan for 3 of 11 workloads (in namespace team-a): 2 admitted")
    assert "research/" not in text and "team-b/" not in text
    empty = invoke("plan", EXAMPLE, "-n", "absent").output.splitlines()
    assert empty[0].startswith("Plan for 0 of 11 workloads (in namespace absent)") and empty[1] == ""
    assert empty[2].startswith("Solver: ") and len(empty) == 3  # no table of no ClusterQueues
    result = invoke("plan", EXAMPLE, "-n", "team-a", "-A")
    assert result.exit_code == 2 and "give -n/--namespace or -A/--all-namespaces, not both" in result.stderr


def labelled_snapshot(tmp_path):
    """Pods, a pod group and Workload objects with labels of their own."""
    from tests.builders import cluster_queue, flatten, flavor, group, local_queue, pod, workload
    job = workload("job", cpu=1)
    job["metadata"]["labels"] = {"app": "trainer", "tier": "batch"}
    docs = flatten([flavor("od"), cluster_queue("cq", {"od": {"cpu": 8}}), local_queue("cq"), job,
                    workload("other", cpu=1), pod("web", labels={"app": "web"}), pod("cron"),
                    group("etl", 2, labels={"app": "etl"})])
    docs[-1]["metadata"]["labels"]["canary"] = "true"  # one pod of the group
    (tmp_path / "snap.yaml").write_text(yaml.safe_dump_all(docs))
    return str(tmp_path / "snap.yaml")


def shown(*args):
    result = invoke("plan", *args, "-o", "json")
    assert result.exit_code == 0, result.output
    return sorted(w["name"] for w in json.loads(result.output)["workloads"])


def test_selector_matches_workload_labels_and_the_labels_of_any_pod(tmp_path):
    snap = labelled_snapshot(tmp_path)
    assert shown(snap, "-l", "app=trainer") == ["default/job"]
    assert shown(snap, "-l", "app in (web, etl)") == ["default/etl", "default/pod-web"]
    assert shown(snap, "-l", "app,app!=web") == ["default/etl", "default/job"]
    assert shown(snap, "-l", "!app") == ["default/other", "default/pod-cron"]
    assert shown(snap, "-l", "canary") == ["default/etl"]  # one of its pods carries it
    assert shown(snap, "-l", "app notin (etl),tier=batch") == ["default/job"]
    assert shown(snap, "-n", "elsewhere", "-l", "app") == []
    data = yaml.safe_load(invoke("plan", snap, "-l", "app=etl", "-o", "yaml").output)
    assert data["metadata"]["filter"] == {"selector": "app=etl", "workloads": 5}
    assert {a["target"] for a in data["actions"]} == {"default/etl", "default/etl-0", "default/etl-1"}
    result = invoke("plan", snap, "-l", "app>1")
    assert result.exit_code == 2 and "error: invalid value for '-l' / '--selector'" in result.stderr


def test_explain_looks_a_name_up_in_the_namespace_and_scope_given():
    result = invoke("explain", EXAMPLE, "-n", "team-a", "pod-render-farm")
    assert result.exit_code == 0 and result.output.startswith("team-a/pod-render-farm: pending")
    result = invoke("explain", EXAMPLE, "-n", "team-b", "pod-render-farm")
    assert result.exit_code == 1 and "no single workload 'team-b/pod-render-farm'" in result.stderr
    result = invoke("explain", EXAMPLE, "-n", "team-b", "team-a/pod-render-farm")
    assert result.exit_code == 1 and "workload team-a/pod-render-farm is not among those shown: in namespace team-b" in result.stderr
    result = invoke("explain", EXAMPLE, "-l", "kueue.x-k8s.io/pod-group-name", "team-a/pod-render-farm")
    assert result.exit_code == 1 and "is not among those shown: matching kueue.x-k8s.io/pod-group-name" in result.stderr


def test_text_plan_marks_new_admissions_apart_from_earlier_ones():
    lines = invoke("plan", EXAMPLE).output.splitlines()
    assert lines[0] == "Plan for 11 workloads: 6 admitted (5 new, 1 before this cycle), 3 pending, 2 inadmissible, 0 finished."
    assert any(line.startswith("ADMITTED NEW team-a/train-resnet  (") for line in lines)
    before = next(line for line in lines if "team-b/pod-indexer" in line)
    assert before.startswith("ADMITTED     team-b/pod-indexer") and before.endswith(", admitted before this cycle)")


def test_text_plan_ends_with_counts_per_cluster_queue():
    lines = invoke("plan", EXAMPLE).output.splitlines()
    table = lines[lines.index("ClusterQueue  admitted new  admitted before  pending  evicted  inadmissible  finished"):]
    assert [row.split() for row in table[1:]] == [["research", "1", "0", "2", "0", "1", "0"],
                                                  ["team-a", "2", "0", "1", "0", "1", "0"],
                                                  ["team-b", "2", "1", "0", "0", "0", "0"]]
    assert lines[-1] == table[-1]


def preemption_snapshot(tmp_path, borrower_priority, reclaim="Any"):
    """ClusterQueue a (4 cpu, preempts lower priorities and reclaims) runs low (2 cpu, priority 0) and
    lends 2 cpu to b's borrower; high (2 cpu, priority 100) needs one of them to go (the borrower
    if a may reclaim it: borrowed quota is taken back before a queue's own work is evicted)."""
    from tests.builders import cluster_queue, flatten, flavor, local_queue, namespace, workload
    docs = flatten([namespace("default"), namespace("other"), flavor("od"),
                    cluster_queue("a", {"od": {"cpu": 4}}, cohort="co", preemption={
                        "withinClusterQueue": "LowerPriority", "reclaimWithinCohort": reclaim}),
                    cluster_queue("b", {"od": {"cpu": 0}}, cohort="co"), local_queue("a"), local_queue("b", ns="other"),
                    workload("low", cpu=2, priority=0, admitted_in=("a", "od")),
                    workload("borrower", ns="other", cpu=2, priority=borrower_priority, admitted_in=("b", "od")),
                    workload("high", cpu=2, priority=100, minute=5)])
    (tmp_path / "snap.yaml").write_text(yaml.safe_dump_all(docs))
    return str(tmp_path / "snap.yaml")


def test_text_plan_says_which_workload_a_preemption_makes_room_for(tmp_path):
    lines = invoke("plan", preemption_snapshot(tmp_path, borrower_priority=100, reclaim="LowerPriority")).output.splitlines()
    assert lines[0] == ("Plan for 3 workloads: 1 admitted (0 new, 1 before this cycle), 1 pending, 1 evicted, "
                        "0 inadmissible, 0 finished.")
    assert "EVICTED      default/low  (queue main -> a, priority 0)" in lines
    assert "  preempt    default/low  (priority 0, ClusterQueue a) to make room for default/high (priority 100)" in lines
    assert [row.split() for row in lines[-2:]] == [["a", "0", "0", "1", "1", "0", "0"], ["b", "0", "1", "0", "0", "0", "0"]]
    explained = invoke("explain", preemption_snapshot(tmp_path, borrower_priority=100, reclaim="LowerPriority"),
                       "default/low").output
    assert "    preempt default/low (priority 0, ClusterQueue a) to make room for default/high (priority 100)" in explained


def test_text_plan_says_when_a_preemption_reclaims_across_the_cohort(tmp_path):
    snap = preemption_snapshot(tmp_path, borrower_priority=0)
    lines = invoke("plan", snap).output.splitlines()
    assert "EVICTED      other/borrower  (queue main -> b, priority 0)" in lines
    assert ("  preempt    other/borrower  (priority 0, ClusterQueue b) to make room for default/high "
            "(priority 100, ClusterQueue a of the same cohort)") in lines
    # shown without its preemptor, an eviction still says what it makes room for
    narrowed = invoke("plan", snap, "-n", "other").output
    assert "to make room for default/high (priority 100, ClusterQueue a of the same cohort)" in narrowed
    assert "PENDING      default/high" not in narrowed


def test_text_plan_counts_a_deactivated_workload_as_evicted_and_says_why(tmp_path):
    from tests.builders import cluster_queue, flatten, flavor, local_queue, workload
    stopped = workload("stopped", cpu=1, admitted_in=("cq", "od"))
    stopped["spec"]["active"] = False
    docs = flatten([flavor("od"), cluster_queue("cq", {"od": {"cpu": 4}}), local_queue("cq"), stopped])
    (tmp_path / "snap.yaml").write_text(yaml.safe_dump_all(docs))
    lines = invoke("plan", str(tmp_path / "snap.yaml")).output.splitlines()
    assert lines[0].startswith("Plan for 1 workloads: 0 admitted (0 new, 0 before this cycle), 0 pending, 1 evicted, ")
    assert lines[2].startswith("EVICTED      default/stopped  (queue main -> cq")
    preempt = next(line for line in lines if line.startswith("  preempt    default/stopped  ("))
    assert "make room" not in preempt  # no preemptor: the reason it stops
    assert lines[-1].split() == ["cq", "0", "0", "0", "1", "0", "0"]
