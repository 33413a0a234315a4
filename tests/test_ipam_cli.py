"""``dranet-cloud ipam list`` and ``ipam gc``, through register() and the real command."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dranet_cloud.cli.ipam_cmd import parse_duration, read_live_claims, register
from dranet_cloud.ipam import IPAM_DB_ENV, Owner, SqliteStore
from dranet_cloud.ipam.node.reclaim import NothingProven
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.toolkit.iprange import ip_range_from_cidr

V4 = ip_range_from_cidr("10.0.0.0/24")
V6 = ip_range_from_cidr("2001:db8::/64")
REPO = Path(__file__).resolve().parents[1]
# The console script the install created, next to this interpreter.
CLI = Path(sys.executable).with_name("dranet-cloud")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="dranet-cloud")
    register(top.add_subparsers(dest="command", required=True))
    return top


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    code: int = args.func(args)
    return code


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Ten claims: 0-4 on eth1, 5-9 on eth2; claim-2 also holds a static address."""
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        for i in range(10):
            store.allocate(Owner("gce", f"eth{1 + i // 5}", f"claim-{i}"), [V4, V6])
        store.reserve(Owner("gce", "eth1", "claim-2"), ["192.168.7.7/24"])
    return path


def test_list_table(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["ipam", "list", "--ipam-db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "POOL",
        "DEVICE",
        "NAMES",
        "CLAIM",
        "NAMESPACE/NAME",
        "POD",
        "ADDRESS",
        "KIND",
        "CREATED",
    ]
    assert set(lines[1]) == {"-", " "}
    assert len(lines) == 2 + 21
    assert any("192.168.7.7/32" in ln and "static" in ln for ln in lines)


def test_list_json_matches_the_store(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["ipam", "list", "--ipam-db", str(db), "-o", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    with SqliteStore(db) as store:
        expected = store.list()
    assert [
        (x["pool"], x["device"], x["claim_uid"], x["address"], x["static"]) for x in listed
    ] == [(a.owner.pool, a.owner.device, a.owner.claim_uid, a.address, a.static) for a in expected]
    assert [datetime.fromisoformat(x["created_at"]) for x in listed] == [
        a.created_at for a in expected
    ]


def test_list_reads_the_environment_variable(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(IPAM_DB_ENV, str(db))
    assert run(["ipam", "list", "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 21


def test_list_of_a_missing_database_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.db"
    assert run(["ipam", "list", "--ipam-db", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "--ipam-db" in err
    assert not missing.exists()  # inspecting must not create an empty database


def test_gc_frees_exactly_the_claims_not_live(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    live_file = tmp_path / "live.txt"
    live_file.write_text(
        "claim-1\n\n  claim-2  \n# a comment\nclaim-7 # trailing\nunknown\n# complete\n"
    )
    argv = ["ipam", "gc", "--ipam-db", str(db), "--live-claims", str(live_file), "--grace", "0s"]
    assert run([*argv, "-o", "json"]) == 0
    freed = json.loads(capsys.readouterr().out)
    assert {x["claim_uid"] for x in freed} == {f"claim-{i}" for i in (0, 3, 4, 5, 6, 8, 9)}
    assert len(freed) == 14
    with SqliteStore(db) as store:
        remaining = store.list()
    assert {a.owner.claim_uid for a in remaining} == {"claim-1", "claim-2", "claim-7"}
    assert len(remaining) == 7
    # a second run has nothing left to free
    assert run(argv) == 0
    assert capsys.readouterr().out.strip() == "nothing to free"


def test_gc_unsafe_free_by_age(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ipam.db"
    now = datetime.now(timezone.utc)
    with SqliteStore(path, clock=lambda: now - timedelta(hours=3)) as old:
        old.allocate(Owner("p", "eth1", "old"), [V4])
    with SqliteStore(path, clock=lambda: now - timedelta(minutes=5)) as new:
        new.allocate(Owner("p", "eth1", "new"), [V4])
    assert run(["ipam", "gc", "--ipam-db", str(path), "--older-than", "2h"]) == 2
    assert "--older-than was removed" in capsys.readouterr().err
    argv = ["ipam", "gc", "--ipam-db", str(path), "--unsafe-free-by-age", "2h"]
    assert run([*argv, "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("would free 1 allocation(s):")
    assert run(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("freed 1 allocation(s):")
    assert " old " in out and " new " not in out
    with SqliteStore(path) as store:
        assert [a.owner.claim_uid for a in store.list()] == ["new"]


def test_gc_grace_keeps_new_allocations_of_unlisted_claims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ipam.db"
    now = datetime.now(timezone.utc)
    with SqliteStore(path, clock=lambda: now - timedelta(hours=3)) as old:
        old.allocate(Owner("p", "eth1", "old-dead"), [V4])
        old.allocate(Owner("p", "eth1", "old-live"), [V4])
    with SqliteStore(path) as new:
        new.allocate(Owner("p", "eth1", "new-dead"), [V4])
    live = tmp_path / "live"
    live.write_text("old-live\n# complete\n")
    argv = ["ipam", "gc", "--ipam-db", str(path), "--live-claims", str(live)]
    assert run([*argv, "-o", "json"]) == 0  # default grace: 2m
    captured = capsys.readouterr()
    assert [x["claim_uid"] for x in json.loads(captured.out)] == ["old-dead"]
    assert "kept 1 allocation(s) of gone claims that are younger than the grace" in captured.err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--kubernetes"),
        (["--live-claims", "-", "--grace", "soon"], "not a duration"),
        (["--kubernetes", "--live-claims", "-"], "exclude each other"),
        (["--kubernetes", "--kubeconfig", "/nonexistent/kc"], "no kubeconfig file"),
        (["--live-claims", "/nonexistent/live.txt"], "cannot read the live claims file"),
    ],
)
def test_gc_usage_errors(
    db: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert run(["ipam", "gc", "--ipam-db", str(db), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert message in err
    with SqliteStore(db) as store:
        assert len(store.list()) == 21  # nothing freed


def test_gc_refuses_a_missing_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ipam", "gc", "--ipam-db", str(tmp_path / "x.db"), "--unsafe-free-by-age", "1d"]
    assert run(argv) == 2
    assert "no IPAM database" in capsys.readouterr().err


def test_parse_duration() -> None:
    assert parse_duration("30s") == timedelta(seconds=30)
    assert parse_duration("10m") == timedelta(minutes=10)
    assert parse_duration("2h") == timedelta(hours=2)
    assert parse_duration("7d") == timedelta(days=7)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("0.5h") == timedelta(minutes=30)
    for bad in ["", "10", "h", "5w", "-1h", "1h 30m"]:
        with pytest.raises(ConfigError):
            parse_duration(bad)


def test_read_live_claims_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb\n\nc\n# complete\n"))
    assert read_live_claims("-") == ["a", "b", "c"]
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb\n"))
    with pytest.raises(NothingProven, match="does not end with the line '# complete'"):
        read_live_claims("-")


def test_real_command_gc_and_list(db: Path, tmp_path: Path) -> None:
    live = tmp_path / "live.txt"
    live.write_text("claim-0\nclaim-9\n# complete\n")
    env = {k: v for k, v in os.environ.items() if k != IPAM_DB_ENV}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CLI), *argv], capture_output=True, text=True, env=env, timeout=60, check=False
        )

    gc = cli(
        "ipam", "gc", "--ipam-db", str(db), "--live-claims", str(live), "--grace=0s", "-o", "json"
    )
    assert gc.returncode == 0, gc.stderr
    assert {x["claim_uid"] for x in json.loads(gc.stdout)} == {f"claim-{i}" for i in range(1, 9)}
    listed = cli("ipam", "list", "--ipam-db", str(db), "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert {x["claim_uid"] for x in json.loads(listed.stdout)} == {"claim-0", "claim-9"}
    bad = cli("ipam", "gc", "--ipam-db", str(db))
    assert bad.returncode == 2
    assert "--kubernetes" in bad.stderr
