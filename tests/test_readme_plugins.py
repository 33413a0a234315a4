"""The README's two example plugins, built from the README alone (SLOW: ~15-30 s).

Every fenced block of the README that starts with ``# file: PATH`` is written
to a fresh directory; nothing else is added.  The plugins are built as wheels
(``pip wheel --no-deps --no-build-isolation``: the installed setuptools, no
index) and installed with ``--no-index`` into a throw-away virtual
environment that sees this environment's packages, so they sit next to the
core exactly as a vendor's would.  Then ``dranet-cloud plugins`` must list
them with their roles, and the core's conformance suite must pass for both:
the enricher with only a sample host, the cloud plugin against its emulator.
"""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from dranet_cloud.testing.environ import isolated_environ

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```(?:toml|python)\n# file: (\S+)\n(.*?)```", re.S)


def readme_files() -> dict[str, str]:
    return {path: body for path, body in BLOCK.findall((REPO / "README.md").read_text())}


def run(*cmd: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = isolated_environ()
    env.pop("PYTHONPATH", None)
    res = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, env=env, timeout=240
    )
    assert res.returncode == 0, f"{cmd}:\n{res.stdout}\n{res.stderr}"
    return res


def test_readme_lists_both_plugins_completely() -> None:
    files = readme_files()
    for plugin in ("acmenic", "acme"):
        names = ("pyproject.toml", f"dranet_cloud_{plugin}/plugin.py")
        for name in (*names, f"tests/test_{plugin}_conformance.py"):
            assert f"{plugin}/{name}" in files, f"README lacks {plugin}/{name}"
    for path, body in files.items():
        if path.endswith(".py"):
            compile(body, path, "exec")  # every Python block is valid on its own


@pytest.mark.slow
def test_readme_plugins_build_install_and_pass_conformance(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for path, body in readme_files().items():
        target = src / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    dist = tmp_path / "dist"
    run(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
        "--no-index", "-w", dist, src / "acmenic", src / "acme",
    )  # fmt: skip
    assert sorted(p.name.split("-")[0] for p in dist.glob("*.whl")) == [
        "dranet_cloud_acme",
        "dranet_cloud_acmenic",
    ]

    # A throw-away environment that also sees this one's packages (the core, pytest).
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    parents = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    lines = [f"import site; site.addsitedir({p!r})" for p in dict.fromkeys(parents)]
    (purelib / "_parent_env.pth").write_text("\n".join(lines) + "\n")
    run(
        python, "-m", "pip", "install", "-q", "--no-index", "--find-links", dist,
        "dranet-cloud-acmenic", "dranet-cloud-acme",
    )  # fmt: skip
    assert (purelib / "dranet_cloud_acme").is_dir(), "the wheel went elsewhere"

    listed = json.loads(run(python, "-m", "dranet_cloud.cli.main", "plugins", "-o", "json").stdout)
    roles = {p["name"]: (p["distribution"], p["roles"]) for p in listed}
    assert roles["acme"] == ("dranet-cloud-acme", ["cloud"])
    assert roles["acmenic"] == ("dranet-cloud-acmenic", ["enricher"])

    # The settings hook of the README's enricher is enforced.
    bare = tmp_path / "bare"
    bare.mkdir()
    bad = subprocess.run(
        [
            python,
            "-m",
            "dranet_cloud.cli.main",
            "detect",
            "--host-root",
            bare,
            "--set",
            "acmenic.famliy=cx9",
        ],
        capture_output=True,
        text=True,
        env=isolated_environ(),
        timeout=60,
    )
    assert bad.returncode == 2 and "did you mean 'family'" in bad.stderr

    # The suite adapts to the role: the enricher skips the cloud-only and
    # profile checks (7, each with its reason), the cloud plugin only profile.
    expected = {
        "acmenic": (
            "recognises its environment",
            "is detected",
            "loads a snapshot",
            "gives device configs",
            "no profile role",
            "reads a metadata server at start",
            "served on its own sample node",
        ),
        "acme": ("no profile role",),
    }
    for plugin, reasons in expected.items():
        out = run(
            python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-o", "addopts=", src / plugin / "tests",
            cwd=src,
        )  # fmt: skip
        summary = out.stdout.strip().splitlines()[-1]
        assert "failed" not in summary and "error" not in summary, out.stdout
        assert re.search(rf"\b{len(reasons)} skipped\b", summary), out.stdout
        assert int(summary.split(" passed")[0].split()[-1]) >= 3, out.stdout
        for reason in reasons:
            assert reason in out.stdout, out.stdout
    assert os.path.isdir(src / "acme" / "tests")
