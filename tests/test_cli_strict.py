"""Misconfigurations that used to pass silently: each exits 2 with a message naming the fix.

In-process (``main([...])``) where possible, so the checks cost milliseconds;
one real process for the busy-port and traceback checks.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dranet_cloud.cli.main import _split_global, main
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.environ import isolated_environ

EMULATE = [sys.executable, "-m", "dranet_cloud.cli.main", "emulate", "gce"]


@pytest.fixture()
def bare(tmp_path: Path) -> Path:
    return HostRootBuilder(tmp_path / "bm").dmi(sys_vendor="Supermicro").build()


def err_of(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        # A typo in a key names the valid ones.
        ("aws.allow_imdsv=true", ["did you mean 'allow_imdsv1'", "aws.endpoint_mode"]),
        # A setting for an unknown plugin is refused, naming the installed ones.
        ("acme.x=1", ["no installed plugin is named 'acme'", "gce"]),
        # An alias points at the plugin's name.
        ("alibaba.x=1", ["--set aliyun.x"]),
    ],
    ids=["key-typo", "unknown-plugin", "alias"],
)
def test_a_setting_naming_no_real_key_or_plugin_says_which(
    bare: Path, capsys: pytest.CaptureFixture[str], setting: str, expected: list[str]
) -> None:
    code, err = err_of(capsys, "detect", "--host-root", str(bare), "--set", setting)
    assert code == 2
    assert all(part in err for part in expected), err


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("aws.allow_imdsv1=maybe", "expected true or false"),
        ("aws.endpoint_mode=ipv5", "expected one of ipv4, ipv6"),
        ("webhook.timeout=nan", "finite"),
        ("webhook.timeout=-1", "greater than 0"),
        ("gce.anything=1", "takes no settings"),
    ],
)
def test_bad_setting_values_are_usage_errors(
    bare: Path, capsys: pytest.CaptureFixture[str], setting: str, expected: str
) -> None:
    code, err = err_of(capsys, "detect", "--host-root", str(bare), "--set", setting)
    assert code == 2, err
    assert expected in err


def test_good_settings_pass(bare: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "detect",
            "--host-root",
            str(bare),
            "-o",
            "json",
            "--set",
            "aws.allow_imdsv1=true",
            "--set",
            "webhook.timeout=2.5",
        ]
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out)["provider"] == "none"


def test_missing_host_root_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = err_of(capsys, "detect", "--host-root", str(tmp_path / "nonexistent"))
    assert code == 2
    assert "no such directory" in err and "hostPath" in err


def test_ipam_db_in_a_missing_directory_is_refused(
    bare: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "typo" / "ipam.db"
    config = tmp_path / "claim.json"
    config.write_text('{"profile": "local-ipam", "interface": {}}')
    base = [
        "profile",
        "get",
        "--host-root",
        str(bare),
        "--ipam-range",
        "10.9.0.0/24",
        "--device",
        "name=eth1,mac=02:00:00:00:00:01",
        "--claim-uid",
        "c1",
        "--config",
        str(config),
        "--ipam-db",
        str(db),
    ]
    code, err = err_of(capsys, *base)
    assert code == 2
    assert "--ipam-db-create" in err and not db.parent.exists()
    code, err = err_of(capsys, *base, "--ipam-db-create", "-o", "json")
    assert code == 0, err
    assert db.is_file()


def test_server_without_a_role_refuses_to_start(
    bare: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = tmp_path / "s.sock"
    code, err = err_of(capsys, "serve", "--listen", f"unix://{sock}", "--host-root", str(bare))
    assert code == 2
    assert "no role" in err and "--ipam-range" in err and "--cloud-provider-hint" in err
    assert not sock.exists()


def test_hint_typo_suggests_an_installed_plugin(
    bare: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = err_of(capsys, "detect", "--host-root", str(bare), "--cloud-provider-hint", "gcee")
    assert code == 2
    assert "did you mean 'gce'?" in err
    assert "pip install" not in err  # no guessed package name


def test_abbreviations_are_off(bare: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["detect", "--host-root", str(bare), "--cloud-provider", "gce"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --cloud-provider" in capsys.readouterr().err


def test_verbose_and_log_format_anywhere() -> None:
    rest, verbose, fmt = _split_global(["detect", "-o", "json", "-vv", "--log-format=json", "-v"])
    assert rest == ["detect", "-o", "json"] and verbose == 3 and fmt == "json"
    rest, verbose, fmt = _split_global(["ipam", "list", "--verbose", "--", "-v"])
    assert rest == ["ipam", "list", "--", "-v"] and verbose == 1 and fmt is None


def test_bad_log_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plugins", "--log-format", "xml"])
    assert exc.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


def test_version_names_the_core_and_every_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("dranet-cloud 0.")
    names = {line.split()[0] for line in lines}
    assert {"dranet-cloud-gce", "dranet-cloud-aws", "dranet-cloud-webhook"} <= names


def test_emulate_on_a_busy_port_is_a_clean_usage_error() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        res = subprocess.run(
            [*EMULATE, "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            env=isolated_environ(),
            timeout=60,
        )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in res.stderr and "127.0.0.1:0" in res.stderr


def test_health_without_a_server_fails_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = err_of(capsys, "health", "--listen", f"unix://{tmp_path}/none.sock")
    assert code == 1 and "unhealthy" in err
    code, err = err_of(capsys, "health", "--listen", "unix://relative.sock")
    assert code == 2 and "unix:///" in err


def json_lines(err: str) -> list[dict[str, str]]:
    docs = [json.loads(line) for line in err.splitlines()]  # every line parses
    assert docs and all(d["ts"].endswith("Z") for d in docs)
    return docs


def test_fatal_errors_are_json_lines_under_log_format_json(
    bare: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sidecar's last words (a bad flag, a typo in --ipam-db) reach a JSON log pipeline."""
    code, err = err_of(capsys, "detect", "--host-root", str(tmp_path / "nope"), "--log-format=json")
    assert code == 2
    assert "no such directory" in json_lines(err)[-1]["msg"]
    sock = tmp_path / "s.sock"
    db = tmp_path / "typo" / "ipam.db"
    argv = ["serve", "--listen", f"unix://{sock}", "--host-root", str(bare), "--ipam-db", str(db)]
    code, err = err_of(capsys, *argv, "--ipam-range", "10.9.0.0/24", "--log-format", "json")
    assert code == 2
    last = json_lines(err)[-1]
    assert last["level"] == "ERROR" and "--ipam-db-create" in last["msg"]
    with pytest.raises(SystemExit) as exc:
        main(["detect", "--cloud-provider", "gce", "--log-format", "json"])
    assert exc.value.code == 2
    assert (
        "unrecognized arguments: --cloud-provider" in json_lines(capsys.readouterr().err)[-1]["msg"]
    )


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"interface": {"type": "IPVLAN"}, "interface": {"type": "Passthrough"}}', "interface"),
        ('{"interface": {"mtu": 9000, "mtu": 1500}}', "mtu"),
    ],
)
def test_config_with_a_duplicate_field_is_refused(tmp_path: Path, text: str, field: str) -> None:
    # DRANET decodes claim configs with sigs.k8s.io/json's UnmarshalStrict,
    # which rejects duplicate fields; `profile get` must not accept a config
    # (silently taking the last copy) that the daemon refuses.
    from dranet_cloud.cli.common import read_config
    from dranet_cloud.toolkit.errors import ConfigError

    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"duplicate field '{field}'"):
        read_config(str(path))


def test_tls_files_that_are_not_pem_are_a_usage_error(
    bare: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Readable but not a certificate and key: exit 2 naming both flags, not "[SSL] PEM lib"."""
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    sock = tmp_path / "s.sock"
    code, err = err_of(
        capsys,
        *("serve", "--listen", f"unix://{sock}", "--host-root", str(bare)),
        *("--ipam-range", "10.9.0.0/24", "--tls-cert", str(junk), "--tls-key", str(junk)),
    )
    assert code == 2, err
    assert "--tls-cert" in err and "--tls-key" in err and "PEM" in err
    assert not sock.exists()


def test_profile_provider_typo_suggests_cloud(
    bare: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'cloud' (the default) is a valid --profile-provider: list it and suggest it."""
    code, err = err_of(capsys, "detect", "--host-root", str(bare), "--profile-provider", "clod")
    assert code == 2
    assert "'cloud'" in err and "did you mean 'cloud'?" in err


def test_bad_log_format_in_the_environment_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """argparse checks choices of flags, not of defaults: the env value needs its own check."""
    monkeypatch.setenv("DRANET_CLOUD_LOG_FORMAT", "jsn")
    with pytest.raises(SystemExit) as exc:
        main(["plugins"])
    assert exc.value.code == 2
    assert "DRANET_CLOUD_LOG_FORMAT='jsn'" in capsys.readouterr().err
