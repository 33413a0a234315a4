"""The CLI speaks one dialect: described and exemplified help, one ``-o``, no reprs, natural order.

The help test walks the real parser tree (every sub-command and
sub-sub-command), so a command added without a description or an example,
or with ``-o`` choices of its own, fails here; every example is parsed, so
one cannot name a flag that does not exist.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dranet_cloud.cli import demo_cmd
from dranet_cloud.cli.helptext import EXAMPLES_HEADING, parse_help
from dranet_cloud.cli.main import _split_global, build_parser, main
from dranet_cloud.cli.output import OUTPUT_CHOICES, device_key, error_text, human, natural_key
from dranet_cloud.contract.context import SampleHost
from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.ipam import Owner, SqliteStore
from dranet_cloud.toolkit.iprange import ip_range_from_cidr

# What a Python repr looks like in text meant for people: a bare None/True/
# False, a list or dict literal, key=None/True/False, a dataclass or Namespace.
PY_REPR = re.compile(
    r"\b(?:None|True|False)\b|\[['\"]|\{['\"]|=\[|\b[A-Z]\w*\(\w+=|\bb'",
)


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(build_parser()))


def _examples(parser: argparse.ArgumentParser) -> list[str]:
    text = parser.epilog or ""
    body = text.partition(EXAMPLES_HEADING)[2]
    return [line.strip() for line in body.splitlines() if line.strip()]


def test_the_walk_reaches_every_level() -> None:
    paths = {p for p, _ in COMMANDS}
    assert {("ipam", "list"), ("ipam", "gc"), ("ipam", "backup")} <= paths
    assert {("profile", "get"), ("profile", "release"), ("emulate",), ("demo",)} <= paths
    assert len(paths) >= 15


@pytest.mark.parametrize(
    ("path", "parser"), COMMANDS, ids=[" ".join(p) or "dranet-cloud" for p, _ in COMMANDS]
)
def test_every_command_has_a_description_and_examples_that_parse(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    shown = parser.format_help()  # what --help prints
    assert parser.description and len(parser.description.split()) >= 5, path
    assert " ".join(parser.description.split()[:5]) in " ".join(shown.split())
    examples = _examples(parser)
    assert examples, f"{' '.join(path)}: no example in --help"
    prefix = " ".join(("dranet-cloud", *path))
    for line in examples:
        assert line in shown
        argv = shlex.split(line, comments=True)
        assert " ".join(argv).startswith(prefix), (path, line)
        rest, _, _ = _split_global(argv[1:])
        if not path:
            continue  # the top level's examples are other commands' lines
        try:
            args = build_parser(path[0]).parse_args(rest)
        except SystemExit as exc:  # --help in an example exits 0; a bad flag exits 2
            assert exc.code == 0, line
            continue
        assert callable(args.func), line


@pytest.mark.parametrize(
    "text",
    [
        "summary only\n\ndranet-cloud x",  # no description
        "summary\n\nWhat it does.\n",  # no examples
        "summary\n\nWhat it does.\n\nx --flag",  # an example that is not a command line
    ],
)
def test_a_help_block_without_description_or_examples_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="x: "):
        parse_help("x", text)


def test_a_help_block_reads_as_it_prints() -> None:
    summary, description, examples = parse_help(
        "x",
        """one line

        What it does,
        on two lines.

        dranet-cloud x        # the plain run
        dranet-cloud x -o json
        """,
    )
    assert summary == "one line" and description == "What it does, on two lines."
    assert examples == ["dranet-cloud x        # the plain run", "dranet-cloud x -o json"]


def test_output_choices_are_one_set_with_one_default() -> None:
    found = {}
    for path, parser in COMMANDS:
        for action in parser._actions:
            if "-o" in action.option_strings or "--output" in action.option_strings:
                assert action.option_strings == ["-o", "--output"], path
                found[path] = (tuple(action.choices or ()), action.default)
    # plugins, detect, describe, profile get/release, ipam list/gc, demo
    assert len(found) >= 8, found
    assert set(found.values()) == {(OUTPUT_CHOICES, "table")}, found


def test_demo_accepts_its_old_text_choice(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser("demo").parse_args(["demo", "-o", "text"])
    assert args.output == "table"
    with pytest.raises(SystemExit) as exc:
        build_parser("plugins").parse_args(["plugins", "-o", "yaml"])
    assert exc.value.code == 2 and "'table', 'json'" in capsys.readouterr().err


def test_demo_help_lists_the_installed_plugins_and_their_variants(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    listed = dict(
        (line.split(None, 1)[0], line.split(None, 1)[1].split(", "))
        for line in out.partition("--variant):")[2].splitlines()
        if line.strip()
    )
    registry = PluginRegistry()
    runnable = [
        n
        for n in registry.names()
        if registry.implements(n, "sample_host") and registry.implements(n, "emulator")
    ]
    assert sorted(listed) == runnable and {"gce", "aws", "aliyun"} <= set(listed)
    assert "trn2" in listed["aws"] and "bond" in listed["aliyun"]
    for name, variants in listed.items():  # every variant listed is one the demo can run
        assert variants[0] == "default"
        for variant in variants:
            dest = tmp_path / name / variant
            wanted = None if variant == "default" else variant
            assert registry.call(name, "sample_host", dest=dest, variant=wanted), (name, variant)


class _Acme:
    """A plugin installed at run time: the listing comes from it, not from a list."""

    @hookimpl
    def sample_host(self, dest: Path, variant: str | None) -> SampleHost | None:
        return SampleHost(root=dest, description="acme") if variant in (None, "big") else None

    @hookimpl
    def emulator(self, fixture: Path | None, listen: str, faults: str | None) -> Any:
        return None

    @hookimpl
    def sample_variants(self) -> list[str]:
        return ["big"]


class _NoEmulator:
    @hookimpl
    def sample_host(self, dest: Path, variant: str | None) -> SampleHost | None:
        return None


def test_runnable_comes_from_the_registry() -> None:
    registry = PluginRegistry()
    registry.register(_Acme(), "acmecloud")
    registry.register(_NoEmulator(), "lonely")
    table = demo_cmd.runnable(registry)
    assert table["acmecloud"] == ["default", "big"]
    assert "lonely" not in table  # the demo needs an emulator too
    assert table["cks"] == ["default"]  # no sample_variants hook: the default only


def test_natural_key_orders_devices_as_people_number_them() -> None:
    names = ["rdma10", "rdma2", "eth10", "eth9", "ens10f0", "ens5f1", "rdma1", "eth0"]
    assert sorted(names, key=natural_key) == [
        "ens5f1",
        "ens10f0",
        "eth0",
        "eth9",
        "eth10",
        "rdma1",
        "rdma2",
        "rdma10",
    ]
    # PCI addresses are hex: text order is their order (0x56 < 0x6c), in both spellings.
    pci = ["0000:6c:00.0", "0000:56:00.0", "0000:a0:00.0"]
    assert sorted(pci, key=natural_key) == ["0000:56:00.0", "0000:6c:00.0", "0000:a0:00.0"]
    assert sorted(["pci-0000-6c-00-0", "pci-0000-56-00-0"], key=natural_key)[0].endswith("56-00-0")
    assert sorted(["eth2", "eth02"], key=natural_key) == ["eth02", "eth2"]  # total order
    # named interfaces first, then PCI-only functions
    devices = [(None, "0000:56:00.0"), ("rdma10", None), ("rdma2", None)]
    assert sorted(devices, key=lambda d: device_key(*d)) == [
        ("rdma2", None),
        ("rdma10", None),
        (None, "0000:56:00.0"),
    ]


def test_ipam_list_orders_devices_naturally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ipam.db"
    v4 = ip_range_from_cidr("10.0.0.0/24")
    with SqliteStore(db) as store:
        # The store lists by identity (MAC): rdma10, rdma2, rdma1; people count up.
        for mac, n in ((1, 10), (2, 2), (3, 1)):
            keys = frozenset({f"name:rdma{n}"})
            owner = Owner("oci", f"mac:a0:88:c2:1b:40:{mac:02x}", f"claim-{n}", keys)
            store.allocate(owner, [v4])
    assert main(["ipam", "list", "--ipam-db", str(db)]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split()[2] for r in rows] == ["rdma1", "rdma2", "rdma10"]
    assert main(["ipam", "list", "--ipam-db", str(db), "-o", "json"]) == 0
    assert [d["names"] for d in json.loads(capsys.readouterr().out)] == [
        ["rdma1"],
        ["rdma2"],
        ["rdma10"],
    ]


def test_human_renders_values_as_the_tables_do() -> None:
    assert human(None) == "-"
    assert human(True) == "true" and human(False) == "false"
    assert human(["10.0.0.2/32", "fd00::2/128"]) == "10.0.0.2/32,fd00::2/128"
    assert human([]) == "-"
    assert human({"GCE_METADATA_HOST": "127.0.0.1:8080"}) == "GCE_METADATA_HOST=127.0.0.1:8080"
    assert human({"mtu": None, "primary": True}) == "mtu=- primary=true"
    assert human(8244) == "8244"
    for value in (None, True, [1, "a"], {"k": None}, {"a": ["b"]}):
        assert not PY_REPR.search(human(value)), value


def test_demo_and_detect_print_no_python_repr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    demo = capsys.readouterr().out
    assert "env GCE_METADATA_HOST=127.0.0.1:" in demo and "release ok: true" in demo
    assert main(["detect", "--host-root", str(Path(__file__).parent / "data")]) == 0
    detect = capsys.readouterr().out
    assert re.search(r"^explicit +false$", detect, re.MULTILINE), detect
    for text in (demo, detect):
        leaked = [line for line in text.splitlines() if PY_REPR.search(line)]
        assert leaked == []


@pytest.mark.parametrize("plugin", ["azure", "oci"])
def test_describe_lists_naturally_and_renders_values_without_reprs(
    plugin: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = PluginRegistry()
    sample = registry.call(plugin, "sample_host", dest=tmp_path / "host", variant=None)
    emu = registry.call(plugin, "emulator", fixture=None, listen="127.0.0.1:0", faults=None)
    emu.start()
    try:
        for key, value in emu.env.items():
            monkeypatch.setenv(key, value)
        argv = ["describe", "--host-root", str(sample.root), "--cloud-provider-hint", plugin]
        assert main(argv) == 0
    finally:
        emu.stop()
    out = capsys.readouterr().out
    names = [r.split()[0] for r in out.split("\n\n")[1].splitlines()[2:]]
    if plugin == "azure":
        assert names[:4] == ["enP40524s1", "eth0", "ib0", "ib1"]
        assert "acceleratedNetworking=true" in out  # a bool attribute, as JSON writes it
    else:  # sixteen RDMA NICs: rdma2 before rdma10, as /sys/class/net's text order is not
        assert names == ["eth0", *(f"rdma{n}" for n in range(16))]
    assert [line for line in out.splitlines() if PY_REPR.search(line)] == []


def test_demo_lists_devices_naturally(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--plugin", "oci", "-o", "json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    described = next(s for s in steps if s["step"].startswith("described"))
    names = [d["device"]["name"] for d in described["data"]]
    assert names == ["eth0", *(f"rdma{n}" for n in range(16))]


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        (["emulate", "gce", "--latency", "0"], None),
        (["emulate", "gce", "--latency", "61"], "'61' must be a finite number of seconds from 0"),
        (["health", "--timeout", "0"], "'0' must be a finite number of seconds above 0"),
        (["health", "--timeout", "nan"], "'nan' must be a finite number"),
        (["serve", "--max-connections", "0"], "'0' must be at least 1"),
        (["serve", "--shutdown-timeout", "x"], "'x' is not a whole number of seconds"),
        (["serve", "--shutdown-timeout", "86401"], "must be between 0 and 86400 seconds"),
        (["detect", "--probe-timeout", "inf"], "at most 86400"),
    ],
)
def test_numbers_are_read_one_way_everywhere(
    argv: list[str], refused: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = build_parser(argv[0])
    if refused is None:
        assert parser.parse_args(argv).latency == 0
        return
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(argv)
    assert exc.value.code == 2 and refused in capsys.readouterr().err


def test_errors_read_without_errno_or_file_reprs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert error_text(PermissionError(13, "Permission denied", "/x")) == "/x: Permission denied"
    assert error_text(ConnectionRefusedError(111, "Connection refused")) == "Connection refused"
    assert error_text(ValueError("bad")) == "bad"
    sock = tmp_path / "gone.sock"
    assert main(["health", "--listen", f"unix://{sock}"]) == 1
    err = capsys.readouterr().err
    assert err == f"unhealthy: unix://{sock}: No such file or directory\n"


def test_emulate_help_lists_the_installed_emulators(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["emulate", "--help"])
    assert exc.value.code == 0
    line = capsys.readouterr().out.partition("installed emulators (PLUGIN): ")[2].split(";")[0]
    registry = PluginRegistry()
    expected = [n for n in registry.names() if registry.implements(n, "emulator")]
    assert line.split(", ") == expected and "gce" in expected
