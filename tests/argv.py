"""Command lines shared by the tests that run the CLI."""

from __future__ import annotations

from pathlib import Path


def serve_argv(tmp_path: Path) -> list[str]:
    """``serve`` on a unix socket in ``tmp_path`` with no cloud: where refused-flag cases start."""
    return ["serve", "--listen", f"unix://{tmp_path}/s.sock", "--cloud-provider-hint", "none"]
