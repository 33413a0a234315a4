"""An answer that is not ECS metadata (a captive portal's page, odd values) fails the start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dranet_cloud_aliyun import plugin
from dranet_cloud_aliyun.emulator import build_emulator, default_tree

from dranet_cloud.cli.main import main as cli_main
from dranet_cloud.contract.context import ProviderContext, SampleHost
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.toolkit.metadata import MetadataNotADocument


def _describe(
    env: dict[str, str],
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = cli_main(["describe", "--cloud-provider-hint", "alibaba", "--host-root", str(root)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("faults", "endpoint"),
    [
        ("html", "PUT {url}/latest/api/token"),  # the portal answers the token request too
        ("html;path=/latest/meta-data/", "GET {url}/latest/meta-data/"),
    ],
)
def test_a_captive_portal_page_exits_3_naming_the_endpoint(
    faults: str,
    endpoint: str,
    erdma_sample: SampleHost,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with build_emulator(None, "127.0.0.1:0", faults) as emu:
        code, err = _describe(emu.env, erdma_sample.root, monkeypatch, capsys)
        assert any(r.fault == "html" for r in emu.log)
    assert code == 3, err
    assert endpoint.format(url=emu.url) in err
    assert "text/html" in err and "not the metadata it asked for" in err
    assert "<html" not in err.lower() and "<form" not in err


@pytest.mark.parametrize(
    ("key", "value", "meaning"),
    [
        ("zone-id", "Please sign in to continue", "an ECS zone"),
        ("region-id", "<b>login</b>", "an ECS region"),
        ("instance-id", "login.example", "an ECS instance id"),
    ],
)
def test_identifying_values_ecs_never_answers_are_refused(
    key: str, value: str, meaning: str, tmp_path: Path, erdma_sample: SampleHost
) -> None:
    tree = default_tree()
    tree["meta-data"][key] = value
    fixture = tmp_path / "odd.json"
    fixture.write_text(json.dumps(tree))
    with build_emulator(fixture) as emu:
        context = ProviderContext(host_root=HostRoot(erdma_sample.root), env=emu.env)
        with pytest.raises(MetadataNotADocument) as info:
            plugin.instance_properties(context=context, deadline=2.0)
    message = str(info.value)
    assert f"GET {emu.url}/latest/meta-data/{key}" in message and meaning in message


def test_an_instance_type_that_is_not_ecs_and_a_zone_outside_the_region(
    tmp_path: Path, erdma_sample: SampleHost
) -> None:
    for key, value, expected in (
        ("instance/instance-type", "m5.large", "an ECS instance type"),
        ("zone-id", "us-east-1a", "which is not in region"),
    ):
        tree = default_tree()
        node = tree["meta-data"]
        *parents, leaf = key.split("/")
        for part in parents:
            node = node[part]
        node[leaf] = value
        fixture = tmp_path / "odd.json"
        fixture.write_text(json.dumps(tree))
        with build_emulator(fixture) as emu:
            context = ProviderContext(host_root=HostRoot(erdma_sample.root), env=emu.env)
            with pytest.raises(MetadataNotADocument, match=expected):
                plugin.instance_properties(context=context, deadline=2.0)
