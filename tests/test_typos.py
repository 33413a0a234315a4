"""Nothing an operator gets wrong on day one passes in silence (issue 33's typos).

Each mistake is made as an operator makes it, against the real command or the
real ``dranet-cloud serve`` process, and the test reads the message the
operator gets: a ``--ipam-range`` selector naming a NIC the node does not
have, a misspelt profile, a claim for a MAC no NIC of the node has, a
read-only database directory, a CIDR with host bits set, ``-o table``, a
flag error, and the demo's output.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from dranet_cloud.cli.main import build_parser
from dranet_cloud.ipam.base import Owner
from dranet_cloud.ipam.node import storefile
from dranet_cloud.ipam.node.sqlite import SqliteStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.providers.local_ipam import LocalIpamConfig, SelectorCheck
from dranet_cloud.testing.cli import EXE, run_cli
from dranet_cloud.testing.hostroot_builder import HostRootBuilder
from dranet_cloud.toolkit.iprange import IPRange

from .argv import serve_argv
from .test_server_cli import ServeProcess, servers  # noqa: F401  (the fixture)

ETH1_MAC = "0c:42:a1:00:00:11"


def node(root: Path) -> HostRootBuilder:
    """A node with eth0 and eth1 (the MAC GoLikeClient sends for eth1)."""
    builder = HostRootBuilder(root)
    builder.nic("eth0", "0c:42:a1:00:00:10", pci="0000:00:04.0")
    builder.nic("eth1", ETH1_MAC, pci="0000:00:05.0")
    builder.build()
    return builder


def health(proc: ServeProcess) -> dict[str, object]:
    r = proc.client().http.get("/health")
    assert r.status_code == 200, r.text
    doc: dict[str, object] = r.json()
    return doc


def claim(
    proc: ServeProcess, uid: str, device: dict[str, str], profile: str = "local-ipam"
) -> httpx.Response:
    return proc.client().post(
        "/GetProfileConfig",
        {"device": device, "claim_uid": uid, "config": {"profile": profile}},
    )


# --- an --ipam-range selector that matches no NIC ------------------------------------


def test_a_selector_matching_no_nic_is_warned_until_it_matches(
    tmp_path: Path,
    servers: list[ServeProcess],  # noqa: F811
) -> None:
    builder = node(tmp_path / "host")
    proc = ServeProcess(
        tmp_path,
        "--host-root",
        str(tmp_path / "host"),
        ranges=("10.5.0.0/24", "eht1=10.7.0.0/24"),
    )
    servers.append(proc)
    first = proc.stderr()
    assert "WARNING" in first and "--ipam-range selector eht1= matches no NIC" in first
    assert "did you mean eth1=?" in first and "eth0, eth1" in first
    assert first.index(" serve on ") < first.index("matches no NIC")  # the first line stays first
    warnings = health(proc)["warnings"]
    assert isinstance(warnings, list) and len(warnings) == 1
    assert "--ipam-range selector eht1= matches no NIC of this node" in warnings[0]
    # The typo's cost, said: eth1 gets the default range.
    r = claim(proc, "c-eth1", {"name": "eth1", "mac_address": ETH1_MAC})
    assert r.status_code == 200 and r.json()["interface"]["addresses"][0].startswith("10.5.0.")

    # The NIC appears (a VF created after start): a claim on it clears the warning.
    builder.nic("eht1", "0c:42:a1:00:00:99", pci="0000:00:06.0").build()
    r = claim(proc, "c-eht1", {"name": "eht1", "mac_address": "0c:42:a1:00:00:99"})
    assert r.status_code == 200 and r.json()["interface"]["addresses"][0].startswith("10.7.0.")
    assert "warnings" not in health(proc)
    log = proc.stderr()
    assert "--ipam-range selector eht1= now matches NIC eht1" in log
    assert log.count("matches no NIC") == 1  # warned once, not per claim or /health
    assert proc.terminate() == 0


def test_the_periodic_check_sees_a_nic_appear_and_leave(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    builder = node(tmp_path)
    check = SelectorCheck(LocalIpamConfig.parse(["mac=0c:42:a1:00:00:77=10.7.0.0/24"]))
    root = HostRoot(tmp_path)
    with caplog.at_level(logging.INFO, logger="dranet_cloud.providers.local_ipam"):
        (warning,) = check.check(root)
        assert "selector mac=0c:42:a1:00:00:77= matches no NIC" in warning
        assert check.check(root) == (warning,)  # no second line for the same state
        builder.nic("eth7", "0c:42:a1:00:00:77").build()
        assert check.check(root) == ()
        shutil.rmtree(tmp_path / "sys" / "class" / "net" / "eth7")  # passed into a pod
        assert len(check.check(root)) == 1
    lines = [r.getMessage() for r in caplog.records]
    assert sum("matches no NIC" in m for m in lines) == 2
    assert sum("now matches a NIC under the host root" in m for m in lines) == 1


# --- a misspelt profile --------------------------------------------------------------


@pytest.fixture
def proc(tmp_path: Path, servers: list[ServeProcess]) -> ServeProcess:  # noqa: F811
    """A server on node() with only the default profile, stopped with the test."""
    node(tmp_path / "host")
    served = ServeProcess(tmp_path, "--host-root", str(tmp_path / "host"))
    servers.append(served)
    return served


def test_an_unknown_profile_names_the_profiles_served(proc: ServeProcess) -> None:
    r = claim(proc, "c-1", {"name": "eth1", "mac_address": ETH1_MAC}, profile="local-ipm")
    assert r.status_code == 404
    assert "profile 'local-ipm' was requested for device eth1" in r.text
    assert "this server serves only the profile(s) 'local-ipam'" in r.text
    assert "no profile provider is configured" not in r.text


# --- a claim for a NIC the node does not show ----------------------------------------


def test_a_claim_for_a_mac_the_node_does_not_show_is_answered_warned_once_and_counted(
    proc: ServeProcess,
) -> None:
    gone = {"name": "eth9", "mac_address": "0c:42:a1:00:00:99"}
    for uid in ("c-1", "c-1", "c-2"):  # a retry and a second claim on the same NIC
        r = claim(proc, uid, gone)
        assert r.status_code == 200 and r.json()["interface"]["addresses"], r.text
    assert claim(proc, "c-3", {"name": "eth1", "mac_address": ETH1_MAC}).status_code == 200
    log = proc.stderr()
    assert log.count("which this node does not show") == 1, log
    line = next(x for x in log.splitlines() if "which this node does not show" in x)
    assert "WARNING" in line and "claim c-1 names device eth9/0c:42:a1:00:00:99" in line
    assert "Passthrough NIC already in its pod, or a claim meant for another node" in line
    metrics = proc.client().http.get("/metrics").text
    assert "dranet_cloud_claims_unseen_nic_total 3.0" in metrics


# --- a read-only database directory ------------------------------------------------


def _read_only_mounts() -> bool:
    """Whether this test may bind-mount a directory read-only in a mount namespace."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind -o ro / / 2>/dev/null"],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


def test_a_read_only_directory_is_named_as_the_cause_not_corruption(tmp_path: Path) -> None:
    if not _read_only_mounts():
        pytest.skip("needs unshare -m and mount (root in a user or mount namespace)")
    db_dir = tmp_path / "ipam"
    db_dir.mkdir()
    SqliteStore(db_dir / "ipam.db").close()
    argv = " ".join([*EXE, "ipam", "list", "--ipam-db", str(db_dir / "ipam.db")])
    res = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind -o ro {db_dir} {db_dir} && exec {argv}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert res.returncode == 2, res.stderr
    assert f"the directory {db_dir} is on a read-only filesystem" in res.stderr
    assert "mount it read-write" in res.stderr
    assert "integrity_check" not in res.stderr and "Traceback" not in res.stderr


def test_a_store_that_turns_read_only_while_serving_logs_exactly_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_access = os.access
    read_only = {"on": False}

    def access(path: object, mode: int) -> bool:  # root may write anywhere: play non-root
        if read_only["on"] and mode == os.W_OK and os.fspath(path) == str(tmp_path):  # type: ignore[arg-type]
            return False
        return real_access(path, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(storefile.os, "access", access)
    v4 = IPRange.parse("10.0.0.0/24")
    with SqliteStore(tmp_path / "ipam.db") as store, caplog.at_level(logging.INFO):
        store.allocate(Owner("p", "eth1", "c-0"), [v4])
        read_only["on"] = True
        for n in range(5):  # /health looks again each second; a scrape, claims in between
            store._writable_checked = 0.0
            state = store.health()
            assert state.ok and len(state.warnings) == 1
            assert store.allocate(Owner("p", "eth1", f"c-{n + 1}"), [v4])
        read_only["on"] = False
        store._writable_checked = 0.0
        assert store.health().warnings == ()
    said = [r for r in caplog.records if "unwritable" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.ERROR
    assert f"the directory {tmp_path} is not writable by this process" in said[0].getMessage()
    assert sum("is writable again" in r.getMessage() for r in caplog.records) == 1


# --- host bits in a range ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "meant"),
    [("10.5.0.1/16", "10.5.0.0/16"), ("2001:db8::1/64", "2001:db8::/64")],
)
def test_host_bits_are_refused_with_the_network_meant(text: str, meant: str) -> None:
    with pytest.raises(ValueError, match=f"{text} has host bits set: did you mean {meant}\\?"):
        IPRange.parse(text)
    assert IPRange.parse(meant) == IPRange.parse(f"{meant}")


@pytest.mark.parametrize("spec", ["10.5.0.1/16", "eth1=10.5.0.1/16"])
def test_serve_refuses_host_bits_in_an_ipam_range(tmp_path: Path, spec: str) -> None:
    res = run_cli(
        *serve_argv(tmp_path),
        "--host-root",
        str(tmp_path),
        "--ipam-db",
        str(tmp_path / "ipam.db"),
        "--ipam-range",
        spec,
        env={},
    )
    assert res.returncode == 2
    assert (
        f"--ipam-range '{spec}': 10.5.0.1/16 has host bits set: did you mean 10.5.0.0/16?"
        in res.stderr
    )
    assert not (tmp_path / "s.sock").exists()


def test_the_example_webhook_refuses_host_bits_in_a_pool() -> None:
    from dranet_cloud_webhook.example_server import build_parser as example_parser

    with pytest.raises(SystemExit):
        example_parser().parse_args(["--ipv4-pool", "10.99.0.1/24"])


# --- -o table everywhere --------------------------------------------------------------


def _commands_with_output(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> set[str]:
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found |= _commands_with_output(child, (*prefix, name))
        elif "-o" in action.option_strings:
            found.add(" ".join(prefix))
    return found


def _not_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def test_every_command_that_takes_o_prints_a_table(tmp_path: Path) -> None:
    host = tmp_path / "host"
    node(host)
    db = str(tmp_path / "ipam.db")
    live = tmp_path / "live.json"
    live.write_text("[]")
    common = ("--host-root", str(host), "--cloud-provider-hint", "none")
    claim_flags = ("--device", "eth1", "--claim-uid", "c-1", "--ipam-range", "10.5.0.0/24")
    (tmp_path / "cfg.json").write_text(
        json.dumps(
            {
                "profile": "local-ipam",
                "routes": [{"destination": "10.9.0.0/16", "gateway": "10.5.0.1"}],
            }
        )
    )
    runs = {
        "plugins": ("plugins",),
        "detect": ("detect", *common),
        "describe": ("describe", *common),
        "profile get": (
            "profile",
            "get",
            *common,
            *claim_flags,
            "--ipam-db",
            db,
            "--config",
            str(tmp_path / "cfg.json"),
        ),
        "profile release": ("profile", "release", *common, *claim_flags, "--ipam-db", db),
        "ipam list": ("ipam", "list", "--ipam-db", db),
        "ipam gc": ("ipam", "gc", "--ipam-db", db, "--live-claims", str(live)),
        "demo": ("demo", "--plugin", "gce"),
    }
    assert set(runs) == _commands_with_output(build_parser()), "a new command takes -o: add it"
    for name, args in runs.items():
        res = run_cli(*args, "-o", "table", env={}, timeout=120)
        assert res.returncode == 0, (name, res.stderr)
        assert res.stdout.strip() and _not_json(res.stdout), (name, res.stdout)
        if name == "profile get":
            lines = res.stdout.splitlines()
            assert lines[0].split() == ["profile", "local-ipam"]
            assert lines[1].split()[0] == "interface.addresses"
            assert lines[1].split()[1].startswith("10.5.0.")
            assert "routes:" in lines and ["10.9.0.0/16", "10.5.0.1"] in [x.split() for x in lines]
        as_json = run_cli(*args, "-o", "json", env={}, timeout=120)
        assert as_json.returncode == 0 and not _not_json(as_json.stdout), (name, as_json.stderr)


# --- flag errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "first", "hint"),
    [
        (
            ("serve", "--listen"),
            "dranet-cloud serve: error: argument --listen: expected one argument",
            "dranet-cloud serve --help",
        ),
        (
            ("ipam", "gc", "--bogus"),
            "dranet-cloud ipam gc: error: unrecognized arguments: --bogus",
            "dranet-cloud ipam gc --help",
        ),
        (
            ("describe", "-o", "yaml"),
            "dranet-cloud describe: error: argument -o/--output: invalid choice: 'yaml' "
            "(choose from 'table', 'json')",
            "dranet-cloud describe --help",
        ),
    ],
)
def test_a_flag_error_is_one_line_and_a_hint(args: tuple[str, ...], first: str, hint: str) -> None:
    res = run_cli(*args, env={})
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines == [first, f"see `{hint}` for every flag"], res.stderr
    assert "usage:" not in res.stderr


# --- the demo says only what is about the demo ----------------------------------------


def test_the_cks_demo_prints_no_warnings_and_names_its_emulator() -> None:
    res = run_cli("demo", "--plugin", "cks", env={}, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "WARNING" not in res.stderr, res.stderr
    assert "[ok ] started the cks Kubernetes API emulator" in res.stdout
    assert "metadata emulator" not in res.stdout
    assert "budget: coreweave.dra.net/speedCurrent dropped on ibp0, ibp1" in res.stdout
    assert res.stdout.rstrip().endswith("demo finished: all checks passed")
