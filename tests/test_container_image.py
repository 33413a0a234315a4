"""The image and a vendor's image built on it (SLOW; needs a working container engine).

Builds ``Containerfile``, then ``Containerfile.plugin`` with the README's
example enricher as the vendor's wheel, and asks the vendor image which
plugins it has and as whom it runs.  Where no docker, podman or buildah can
build (no engine, no base image without a registry) the test says so and
skips; ``.ci/run`` builds the main image under the same conditions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_readme_plugins import readme_files, run

REPO = Path(__file__).resolve().parents[1]
BASE_IMAGE = "docker.io/library/python:3.12-slim-bookworm"


def engine() -> str:
    """A container tool that can build here, or skip with the reason."""
    for tool, probe in (("docker", "info"), ("podman", "info")):
        exe = shutil.which(tool)
        if exe and subprocess.run([exe, probe], capture_output=True, timeout=60).returncode == 0:
            have = subprocess.run([exe, "image", "inspect", BASE_IMAGE], capture_output=True)
            if have.returncode != 0:
                pytest.skip(f"{tool} works but has no {BASE_IMAGE} (CI pulls no images)")
            return exe
    pytest.skip("no working container engine (docker info / podman info fail or are missing)")


@pytest.mark.slow
def test_a_vendor_adds_a_plugin_to_the_image(tmp_path: Path) -> None:
    exe = engine()
    run(exe, "build", "-f", "Containerfile", "-t", "dranet-cloud:test", ".", cwd=REPO)
    ctx = tmp_path / "ctx"
    for path, body in readme_files().items():
        if path.startswith("acmenic/"):
            (ctx / path).parent.mkdir(parents=True, exist_ok=True)
            (ctx / path).write_text(body)
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        ctx / "vendor-wheels",
        ctx / "acmenic",
    )
    shutil.copy(REPO / "Containerfile.plugin", ctx / "Containerfile.plugin")
    run(
        exe,
        "build",
        "-f",
        "Containerfile.plugin",
        "--build-arg",
        "BASE=dranet-cloud:test",
        "-t",
        "dranet-cloud-acme:test",
        ".",
        cwd=ctx,
    )
    listed = run(exe, "run", "--rm", "dranet-cloud-acme:test", "plugins", "-o", "json")
    names = {p["name"] for p in json.loads(listed.stdout)}
    assert {"acmenic", "gce", "aws"} <= names
    who = run(exe, "run", "--rm", "--entrypoint", "id", "dranet-cloud-acme:test", "-u")
    assert who.stdout.strip() == "65532"
