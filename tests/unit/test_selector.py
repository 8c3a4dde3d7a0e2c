"""kubectl's label selector syntax (-l/--selector), parsed as k8s.io/apimachinery/pkg/labels does."""

import pytest

from clueue.adapters.selector import parse_label_selector
from clueue.engine.objects import Requirement


@pytest.mark.parametrize("text, requirements", [
    ("", []),
    ("app=web", [("app", "In", ("web",))]),
    ("app==web", [("app", "In", ("web",))]),
    ("app!=web", [("app", "NotIn", ("web",))]),
    ("app", [("app", "Exists", ())]),
    ("!app", [("app", "DoesNotExist", ())]),
    ("tier in (web, api)", [("tier", "In", ("web", "api"))]),
    ("tier notin(web)", [("tier", "NotIn", ("web",))]),
    ("a=b,c!=d,e in (x,y),!f", [("a", "In", ("b",)), ("c", "NotIn", ("d",)), ("e", "In", ("x", "y")),
                                ("f", "DoesNotExist", ())]),
    (" example.com/team = ml , app ", [("example.com/team", "In", ("ml",)), ("app", "Exists", ())]),
    ("app=", [("app", "In", ("",))]),  # the empty value, as kubectl reads it
])
def test_kubectl_forms(text, requirements):
    assert parse_label_selector(text).match_expressions == tuple(Requirement(*r) for r in requirements)


@pytest.mark.parametrize("text, message", [
    ("a=b,", "a requirement is missing after the last ','"),
    ("a=b c", "expected ',' between requirements, got 'c'"),
    ("a in x", "expected '(' after a in, got 'x'"),
    ("a in (x", "expected ')' closing the values of a in at the end"),
    ("a in ()", "expected a value for a, got ')'"),
    ("=b", "expected a label key, got '='"),
    ("a b", "after 'a': expected =, ==, !=, in or notin, got 'b'"),
    ("a>1", "the numeric comparisons < and > are not supported"),
    ("Bad_/x=y", "'Bad_/x' is not a valid label key"),
    ("a=-x", "'-x' (for a) is not a valid label value"),
    ("a=" + "v" * 64, "is not a valid label value"),
    ("!", "expected a label key at the end"),
])
def test_what_is_not_a_selector_is_refused_saying_why(text, message):
    with pytest.raises(ValueError) as error:
        parse_label_selector(text)
    assert message in str(error.value)


def test_matching_follows_kubernetes():
    selector = parse_label_selector("app in (web,api),tier!=db,!canary")
    assert selector.matches({"app": "web"}) and selector.matches({"app": "api", "tier": "front"})
    assert not selector.matches({"app": "web", "canary": ""}) and not selector.matches({"app": "web", "tier": "db"})
    assert not selector.matches({}) and parse_label_selector("tier!=db").matches({})  # != matches a missing key
