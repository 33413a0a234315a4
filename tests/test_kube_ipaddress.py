"""IPAddress objects: the API emulator's semantics and the typed client, over real loopback HTTP."""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dranet_cloud.kube import (
    KubeAlreadyExists,
    KubeClient,
    KubeConflict,
    KubeError,
    KubeInvalid,
    KubeNotFound,
    ParentRef,
    canonical_name,
)
from dranet_cloud.testing.kube_rules import LabelSelector, SelectorError
from dranet_cloud.testing.kubernetes import CALLS_PATH, KubernetesEmulator, parse_api_faults
from dranet_cloud.testing.messages import Request, Response

PATH = "/apis/networking.k8s.io/v1/ipaddresses"
CLAIM = ParentRef.resource_claim("team-a", "nic-0")


def body(ip: str, /, **parent: str) -> dict[str, Any]:
    ref = {"group": "resource.k8s.io", "resource": "resourceclaims", "namespace": "ns", "name": "c"}
    ref.update(parent)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {"name": ip, "labels": {"ipaddress.kubernetes.io/managed-by": "t"}},
        "spec": {"parentRef": {k: v for k, v in ref.items() if v}},
    }


def labelled(**labels: str) -> dict[str, Any]:
    doc = body("10.0.0.1")
    doc["metadata"]["labels"] = labels
    return doc


def annotated(**annotations: str) -> dict[str, Any]:
    doc = body("10.0.0.1")
    doc["metadata"]["annotations"] = annotations
    return doc


@pytest.fixture
def http(kube: KubernetesEmulator) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {kube.token}"}
    with httpx.Client(base_url=kube.url, headers=headers) as client:
        yield client


@pytest.fixture(scope="module")
def refusing() -> Iterator[tuple[KubernetesEmulator, httpx.Client]]:
    """One emulator for the requests it must refuse (they leave it empty)."""
    with KubernetesEmulator() as emu:
        headers = {"Authorization": f"Bearer {emu.token}"}
        with httpx.Client(base_url=emu.url, headers=headers) as client:
            yield emu, client


# --- the emulator, as raw HTTP ------------------------------------------------------------


def test_create_get_delete_speak_kubernetes_json(
    kube: KubernetesEmulator, http: httpx.Client
) -> None:
    created = http.post(PATH, json=body("10.0.0.5"))
    assert created.status_code == 201
    obj = created.json()
    assert (obj["apiVersion"], obj["kind"]) == ("networking.k8s.io/v1", "IPAddress")
    meta = obj["metadata"]
    assert meta["name"] == "10.0.0.5" and meta["uid"] and meta["resourceVersion"].isdigit()
    assert meta["creationTimestamp"].endswith("Z")
    assert obj["spec"]["parentRef"] == {
        "group": "resource.k8s.io",
        "resource": "resourceclaims",
        "namespace": "ns",
        "name": "c",
    }
    assert http.get(f"{PATH}/10.0.0.5").json() == obj
    assert kube.ip_address("10.0.0.5") == obj

    taken = http.post(PATH, json=body("10.0.0.5", name="other"))
    assert taken.status_code == 409
    status = taken.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "AlreadyExists", 409)
    assert status["details"] == {
        "name": "10.0.0.5",
        "group": "networking.k8s.io",
        "kind": "ipaddresses",
    }
    assert kube.ip_address("10.0.0.5") == obj  # the first holder keeps it

    wrong = http.request(
        "DELETE", f"{PATH}/10.0.0.5", json={"kind": "DeleteOptions", "preconditions": {"uid": "x"}}
    )
    assert wrong.status_code == 409 and wrong.json()["reason"] == "Conflict"
    assert "UID in precondition: x" in wrong.json()["message"]
    assert kube.ip_address("10.0.0.5") is not None

    gone = http.request("DELETE", f"{PATH}/10.0.0.5", json={"preconditions": {"uid": meta["uid"]}})
    assert gone.status_code == 200
    assert gone.json()["status"] == "Success" and gone.json()["details"]["uid"] == meta["uid"]
    missing = http.get(f"{PATH}/10.0.0.5")
    assert missing.status_code == 404 and missing.json()["reason"] == "NotFound"
    assert missing.json()["details"]["name"] == "10.0.0.5"
    assert http.delete(f"{PATH}/10.0.0.5").status_code == 404
    assert http.put(f"{PATH}/10.0.0.5", json=body("10.0.0.5")).status_code == 405


@pytest.mark.parametrize(
    ("doc", "field", "says"),
    [
        (body("10.0.0.01"), "metadata.name", "leading 0s"),
        (body("10.0.0.256"), "metadata.name", "valid IP address"),
        (body("2001:db8:0:0:0:0:0:1"), "metadata.name", 'canonical form ("2001:db8::1")'),
        (body("2001:DB8::1"), "metadata.name", "canonical form"),
        (body("::ffff:10.0.0.1"), "metadata.name", "IPv4-mapped"),
        (body("fe80::1%eth0"), "metadata.name", "zone"),
        (body("web-1"), "metadata.name", "valid IP address"),
        (
            {"metadata": {"generateName": "10.0.0."}, "spec": body("1.1.1.1")["spec"]},
            "metadata.generateName",
            "valid IP address",
        ),
        ({"metadata": {}, "spec": body("1.1.1.1")["spec"]}, "metadata.name", "Required"),
        ({"metadata": {"name": "10.0.0.1"}, "spec": {}}, "spec.parentRef", "Required"),
        ({"metadata": {"name": "10.0.0.1"}}, "spec.parentRef", "Required"),
        (body("10.0.0.1", resource=""), "spec.parentRef.resource", "Required"),
        (body("10.0.0.1", name=""), "spec.parentRef.name", "Required"),
        (body("10.0.0.1", name="a/b"), "spec.parentRef.name", "may not contain '/'"),
        (body("10.0.0.1", group="Not_A_Group"), "spec.parentRef.group", "RFC 1123"),
        (labelled(device="mac:02:00:00:00:00:01"), "metadata.labels", "a valid label"),
        (labelled(node="n" * 64), "metadata.labels", "no more than 63"),
        (labelled(**{"Bad_Prefix/x": "1"}), "metadata.labels", "prefix part"),
        (labelled(**{"-x": "1"}), "metadata.labels", "name part"),
        (annotated(**{"a/b/c": "1"}), "metadata.annotations", "prefix part"),
        (annotated(big="x" * (256 * 1024)), "metadata.annotations", "Too long"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_create_is_validated_like_the_api_server(
    refusing: tuple[KubernetesEmulator, httpx.Client], doc: dict[str, Any], field: str, says: str
) -> None:
    kube, http = refusing
    refused = http.post(PATH, json=doc)
    assert refused.status_code == 422
    status = refused.json()
    assert (status["reason"], status["details"]["kind"]) == ("Invalid", "IPAddress")
    assert status["details"]["group"] == "networking.k8s.io"
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert field in causes and says in causes[field], causes
    assert kube.ip_addresses() == []


@pytest.mark.parametrize("name", ["10.0.0.1", "0.0.0.0", "2001:db8::1", "::1", "1:0:1:1:1:1:1:1"])
def test_canonical_names_are_accepted(http: httpx.Client, name: str) -> None:
    doc = body(name)
    doc["metadata"]["labels"].update({"example.com/node": "node-1.a_b", "empty": ""})
    doc["metadata"]["annotations"] = {"example.com/device": "mac:02:00:00:00:00:01"}
    assert http.post(PATH, json=doc).status_code == 201
    assert canonical_name(name) == name


def test_canonical_name_refuses_what_the_api_refuses() -> None:
    assert canonical_name("2001:DB8:0:0::1") == "2001:db8::1"
    for bad in ("::ffff:10.0.0.1", "fe80::1%eth0", "10.0.0.01", "x"):
        with pytest.raises(ValueError):
            canonical_name(bad)


def test_list_pages_by_label_selector_from_a_snapshot(
    kube: KubernetesEmulator, http: httpx.Client
) -> None:
    for i in range(12):
        kube.add_ip_address(f"10.1.0.{i}", labels={"node": "a" if i % 3 else "b", "i": str(i)})
    first = http.get(PATH, params={"labelSelector": "node=a", "limit": 3}).json()
    assert first["kind"] == "IPAddressList" and first["metadata"]["resourceVersion"].isdigit()
    assert "kind" not in first["items"][0]
    assert first["metadata"]["remainingItemCount"] == 5
    kube.add_ip_address("10.1.0.99", labels={"node": "a"})  # after the first page: not listed
    names = [i["metadata"]["name"] for i in first["items"]]
    token = first["metadata"]["continue"]
    while token:
        page = http.get(PATH, params={"labelSelector": "node=a", "limit": 3, "continue": token})
        names += [i["metadata"]["name"] for i in page.json()["items"]]
        token = page.json()["metadata"].get("continue")
    assert sorted(names) == sorted(f"10.1.0.{i}" for i in range(12) if i % 3)
    kube.expire_lists()
    stale = http.get(PATH, params={"limit": 3, "continue": first["metadata"]["continue"]})
    assert stale.status_code == 410 and stale.json()["reason"] == "Expired"
    bad = http.get(PATH, params={"labelSelector": "node in a"})
    assert bad.status_code == 400 and bad.json()["reason"] == "BadRequest"


@pytest.mark.parametrize(
    ("selector", "matching"),
    [
        ("", {"x", "y", "z"}),
        ("role=web", {"x"}),
        ("role==web", {"x"}),
        ("role!=web", {"y", "z"}),  # z has no role: != matches it, as in Kubernetes
        ("role in (web, db)", {"x", "y"}),
        ("role notin (web)", {"y", "z"}),
        ("role", {"x", "y"}),
        ("!role", {"z"}),
        ("role,tier=1", {"x"}),
        ("tier>1", {"y"}),
        ("tier<2,role", {"x"}),
        ("example.com/owner=me", {"z"}),
    ],
)
def test_label_selectors(selector: str, matching: set[str]) -> None:
    labels = {
        "x": {"role": "web", "tier": "1"},
        "y": {"role": "db", "tier": "2"},
        "z": {"example.com/owner": "me"},
    }
    parsed = LabelSelector(selector)
    assert {name for name, have in labels.items() if parsed.matches(have)} == matching


@pytest.mark.parametrize(
    ("selector", "sets"),
    [
        ("", []),
        ("role=web,tier!=1", [("role", {"web"})]),
        ("role in (web, db),tier", [("role", {"web", "db"})]),
        ("role notin (web),tier>1,!x", []),
        ("a==1,b in (2)", [("a", {"1"}), ("b", {"2"})]),
    ],
)
def test_label_selectors_expose_the_values_they_accept(
    selector: str, sets: list[tuple[str, set[str]]]
) -> None:
    """What the watch fan-out indexes: the requirements that name every value they match."""
    assert [(k, set(v)) for k, v in LabelSelector(selector).sets] == sets


@pytest.mark.parametrize("selector", ["a=b,", "a in b", "a=(b)", "a>b", "=b", "a b"])
def test_bad_label_selectors_are_refused(selector: str) -> None:
    with pytest.raises(SelectorError):
        LabelSelector(selector)


def test_kube_system_uid_is_the_cluster_identity(kube: KubernetesEmulator) -> None:
    with (
        KubernetesEmulator(cluster_uid="cluster-b") as other,
        KubeClient(str(kube.write_kubeconfig()), timeout=5) as a,
        KubeClient(str(other.write_kubeconfig()), timeout=5) as b,
    ):
        assert a.cluster_uid() == kube.cluster_uid != ""
        assert b.cluster_uid() == "cluster-b"
        ns = httpx.get(
            other.url + "/api/v1/namespaces/kube-system",
            headers={"Authorization": f"Bearer {other.token}"},
        ).json()
        assert (ns["kind"], ns["metadata"]["name"], ns["metadata"]["uid"]) == (
            "Namespace",
            "kube-system",
            "cluster-b",
        )


# --- the typed client -----------------------------------------------------------------------


def test_client_creates_gets_deletes(kube: KubernetesEmulator, kube_client: KubeClient) -> None:
    labels = {"ipaddress.kubernetes.io/managed-by": "dranet-cloud", "node": "n1"}
    made = kube_client.create_ip_address("10.2.0.1", CLAIM, labels, {"claim-uid": "u-1"})
    assert (made.name, made.parent, dict(made.labels)) == ("10.2.0.1", CLAIM, labels)
    assert made.annotations == {"claim-uid": "u-1"} and made.created is not None
    assert made.uid == kube.ip_address("10.2.0.1")["metadata"]["uid"]  # type: ignore[index]
    assert kube_client.get_ip_address("10.2.0.1") == made
    assert {made, kube_client.get_ip_address("10.2.0.1")} == {made}  # hashable, equal

    with pytest.raises(KubeAlreadyExists) as taken:
        kube_client.create_ip_address("10.2.0.1", ParentRef.resource_claim("ns", "other"))
    assert taken.value.status == 409 and taken.value.object_name == "10.2.0.1"
    assert not taken.value.transient

    with pytest.raises(KubeConflict) as conflict:
        kube_client.delete_ip_address("10.2.0.1", "not-its-uid")
    assert not isinstance(conflict.value, KubeAlreadyExists)
    assert kube_client.get_ip_address("10.2.0.1").uid == made.uid

    kube_client.delete_ip_address("10.2.0.1", made.uid)
    assert kube.ip_address("10.2.0.1") is None
    for call in (
        lambda: kube_client.get_ip_address("10.2.0.1"),
        lambda: kube_client.delete_ip_address("10.2.0.1", made.uid),
    ):
        with pytest.raises(KubeNotFound) as missing:
            call()
        assert missing.value.object_name == "10.2.0.1"
    assert kube.calls() == {"create": 2, "get": 4, "delete": 3}
    auth = {"Authorization": f"Bearer {kube.token}"}
    counts = httpx.get(kube.url + CALLS_PATH, headers=auth).json()
    assert counts["requests"]["ipaddresses"] == {"create": 2, "delete": 3, "get": 4}
    # objects served: the two creates that succeeded, the three gets that found one
    assert counts["objects"]["ipaddresses"] == {"create": 1, "get": 3}
    reset = httpx.delete(kube.url + CALLS_PATH, headers=auth).json()
    assert reset == {"requests": {}, "objects": {}, "watches_open": {}}
    assert kube.calls() == {}


def test_client_reads_objects_others_made(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    kube.add_ip_address("10.96.0.1")  # the API server's own: a Service's ClusterIP
    kube.put({"kind": "IPAddress", "metadata": {"name": "10.96.0.2"}})  # no parentRef at all
    service, bare = kube_client.list_ip_addresses()
    assert service.parent == ParentRef("", "services", "default", "kubernetes")
    assert bare.parent is None and bare.uid


def test_client_invalid_names_raise_kube_invalid(kube_client: KubeClient) -> None:
    with pytest.raises(KubeInvalid) as invalid:
        kube_client.create_ip_address("2001:db8:0::1", CLAIM)
    assert invalid.value.status == 422 and not invalid.value.transient
    assert any(c.startswith("metadata.name:") for c in invalid.value.causes)
    with pytest.raises(ValueError):
        kube_client.get_ip_address("../namespaces")


def test_one_name_created_by_many_threads_has_one_winner(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(24)

    def race(i: int) -> None:
        start.wait()
        try:
            kube_client.create_ip_address("10.3.0.7", ParentRef.resource_claim("ns", f"c{i}"))
            result = "created"
        except KubeAlreadyExists:
            result = "taken"
        with lock:
            outcomes[result] += 1

    threads = [threading.Thread(target=race, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert outcomes == {"created": 1, "taken": 23}
    assert len(kube.ip_addresses()) == 1


def test_a_lost_reply_is_an_error_and_the_object_exists(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    kube.lose_replies(2)
    for name in ("10.4.0.1", "10.4.0.2"):
        with pytest.raises(KubeError) as lost:
            kube_client.create_ip_address(name, CLAIM)
        assert lost.value.status is None and lost.value.transient
        assert "may have been committed" in str(lost.value) and name in str(lost.value)
        held = kube_client.get_ip_address(name)  # what the caller does next: adopt it
        assert held.parent == CLAIM
    assert [r.fault for r in kube.emulator.requests(PATH) if r.method == "POST"] == [
        "lost-reply",
        "lost-reply",
    ]
    assert kube_client.create_ip_address("10.4.0.3", CLAIM).name == "10.4.0.3"  # used up

    kube.lose_replies(1, verb="delete")
    with pytest.raises(KubeError) as lost_delete:
        kube_client.delete_ip_address("10.4.0.3", kube_client.get_ip_address("10.4.0.3").uid)
    assert lost_delete.value.transient and kube.ip_address("10.4.0.3") is None


def test_list_is_complete_across_pages_and_expiry(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    for i in range(23):
        kube.add_ip_address(f"10.5.0.{i}", labels={"node": f"n{i % 2}"})
    everything = kube_client.list_ip_addresses(page_size=5)
    assert sorted(o.name for o in everything) == sorted(f"10.5.0.{i}" for i in range(23))
    assert kube.calls()["list"] == 5
    odd = kube_client.list_ip_addresses({"node": "n1"}, page_size=4)
    assert sorted(o.name for o in odd) == sorted(f"10.5.0.{i}" for i in range(1, 23, 2))
    assert len(kube_client.list_ip_addresses("node notin (n1)", page_size=4)) == 12

    kube.fail(410, continue_only=True)  # the snapshot expires mid-way: start again
    assert len(kube_client.list_ip_addresses(page_size=5)) == 23

    kube.fail(500, continue_only=True)  # an error mid-way: no partial list
    with pytest.raises(KubeError) as failed:
        kube_client.list_ip_addresses(page_size=5)
    assert failed.value.status == 500 and failed.value.transient


def test_a_partial_page_is_refused(kube: KubernetesEmulator, kube_client: KubeClient) -> None:
    kube.add_ip_address("10.6.0.1")
    kube.faults.load(f"malformed;path={PATH}")
    with pytest.raises(KubeError, match="not the expected object"):
        kube_client.list_ip_addresses()


def test_pages_that_never_end_are_refused(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    kube.add_ip_address("10.6.0.1")
    served = kube.emulator.handler

    def same_page_forever(request: Request) -> Response:
        query = {k: v for k, v in request.query.items() if k != "continue"}
        answer = served(dataclasses.replace(request, query=query))
        doc = json.loads(answer.body)
        doc["metadata"]["continue"] = "again"
        return Response.json(doc)

    kube.emulator.handler = same_page_forever
    with pytest.raises(KubeError, match="continue token twice"):
        kube_client.list_ip_addresses()
    assert kube.calls()["list"] == 2


def test_planned_failures_per_verb(kube: KubernetesEmulator, kube_client: KubeClient) -> None:
    kube.fail(503, verb="create", resource="ipaddresses", times=2)
    kube.fail(429, verb="list")
    with pytest.raises(KubeError) as busy:
        kube_client.list_ip_addresses()
    assert busy.value.status == 429 and busy.value.transient
    for _ in range(2):
        with pytest.raises(KubeError) as down:
            kube_client.create_ip_address("10.7.0.1", CLAIM)
        assert down.value.status == 503 and down.value.transient
        assert "create ipaddress 10.7.0.1" in str(down.value)
        assert "may have been committed" in str(down.value)  # a 5xx proves nothing
    assert kube.ip_addresses() == []
    assert kube_client.create_ip_address("10.7.0.1", CLAIM).name == "10.7.0.1"
    assert kube.calls() == {"create": 3, "list": 1}

    kube.fail(503, verb="create", times=None)  # down until cleared
    for _ in range(3):
        with pytest.raises(KubeError):
            kube_client.create_ip_address("10.7.0.2", CLAIM)
    kube.clear_faults()
    assert kube_client.create_ip_address("10.7.0.2", CLAIM).name == "10.7.0.2"

    kube.fail(403, verb="delete")
    with pytest.raises(KubeError, match=r"grant delete on ipaddresses\.networking\.k8s\.io"):
        kube_client.delete_ip_address("10.7.0.1", "u")


def test_api_fault_spec() -> None:
    spec = parse_api_faults(
        "latency=0.002; fail=create:503x3; fail=*:429; fail=get:500x*; lose-reply=create:2"
    )
    assert spec.latency == 0.002
    assert spec.failures == (("create", 503, 3), ("", 429, 1), ("get", 500, None))
    assert spec.lost_replies == (("create", 2),)
    for bad in (
        "latency=-1",
        "latency=nan",
        "fail=patch:503",
        "fail=get:200",
        "fail=get:499",
        "fail=get:503x0",
        "lose-reply=get",
        "drop=1",
    ):
        with pytest.raises(ValueError, match="api fault spec"):
            parse_api_faults(bad)
    with pytest.raises(ValueError, match="HTTP error status"):
        KubernetesEmulator().fail(299)
    with KubernetesEmulator(api_faults="latency=0.001;lose-reply=create") as emu:
        assert emu.latency == 0.001
        with KubeClient(str(emu.write_kubeconfig()), timeout=5) as client:
            with pytest.raises(KubeError):
                client.create_ip_address("10.8.0.1", CLAIM)
            assert emu.ip_address("10.8.0.1") is not None


def test_emulate_flags_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    from dranet_cloud.cli.main import main

    assert main(["emulate", "gce", "--api-faults", "fail=create:503"]) == 2
    assert "--api-faults is for `emulate kubernetes` only" in capsys.readouterr().err
    assert main(["emulate", "kubernetes", "--api-faults", "fail=patch:503"]) == 2
    assert "unknown verb 'patch'" in capsys.readouterr().err
    for bad in ("-1", "nan", "x"):
        with pytest.raises(SystemExit):
            main(["emulate", "kubernetes", "--latency", bad])


def test_selected_lists_and_watches_follow_label_changes(
    kube: KubernetesEmulator, http: httpx.Client
) -> None:
    """Lists and watches with ``k=v``/``k in (...)`` read a label index: it must follow
    every relabel, replacement and delete exactly as a scan of every object would."""
    rng = random.Random(7)
    blocks = ["a", "b", "c", None]
    for step in range(300):
        ip = f"10.0.0.{rng.randrange(40)}"
        if rng.random() < 0.2:
            kube.delete_ip_address(ip)
            continue
        block = rng.choice(blocks)
        labels = {"block": block} if block else {}
        if rng.random() < 0.5:
            labels["team"] = rng.choice(["x", "y"])
        # a new UID now and then: a replacement (DELETED + ADDED), else an update
        kube.add_ip_address(ip, labels=labels, uid=f"u{step}" if rng.random() < 0.2 else None)
    for selector in (
        "block in (a,b)",
        "block=c",
        "block in (c),team=x",
        "team in (y),block notin (a)",
        "block in (zz)",
        "",
    ):
        want = [o["metadata"]["name"] for o in kube.ip_addresses(selector)]
        listed = http.get(PATH, params={"labelSelector": selector}).json()["items"]
        assert [o["metadata"]["name"] for o in listed] == sorted(want), selector
        answer = http.get(
            PATH, params={"watch": "true", "labelSelector": selector, "timeoutSeconds": "0"}
        )
        added = [
            json.loads(line)["object"]["metadata"]["name"] for line in answer.iter_lines() if line
        ]
        assert added == sorted(want), selector
