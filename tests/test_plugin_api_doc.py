"""docs/plugin-api.md holds what a vendor needs, and it is true.

Every hook is written with its full signature, as ``dranet_cloud/contract/hookspecs.py``
has it; every endpoint the BYODP server serves has a section, and the
request bodies shown there, sent in order to the real ``dranet-cloud serve``
on the GCE plugin's sample node against the GCE emulator, get exactly the
answers shown.
"""

from __future__ import annotations

import inspect
import ipaddress
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dranet_cloud.contract import hookspecs
from dranet_cloud.host.plugin_manager import HOOK_NAMES, PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.server.app import create_app

from .test_server_cli import ServeProcess

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugin-api.md"
SECTION = re.compile(r"^### `(GET|POST) (/\w+)`$", re.M)
BLOCK = re.compile(r"^```json (request|answer)\n(.*?)^```$", re.M | re.S)


def doc_text() -> str:
    return DOC.read_text()


def signature(hook: str) -> str:
    """``def name(arg: T, ...) -> R`` as the hook spec declares it (annotations as written)."""
    func = getattr(hookspecs, hook)
    params = ", ".join(
        f"{p.name}: {p.annotation}" for p in inspect.signature(func).parameters.values()
    )
    return f"def {hook}({params}) -> {func.__annotations__['return']}"


def documented_signatures() -> dict[str, str]:
    """Hook name -> the ``def`` line the doc's python blocks give it."""
    lines = [
        line
        for block in re.findall(r"^```python\n(.*?)^```$", doc_text(), re.M | re.S)
        for line in block.splitlines()
        if line.startswith("def ")
    ]
    return {line[4:].split("(", 1)[0]: line for line in lines}


def test_every_hook_is_documented_with_its_full_signature() -> None:
    documented = documented_signatures()
    assert HOOK_NAMES, "no hooks found in dranet_cloud.contract.hookspecs"
    for hook in sorted(HOOK_NAMES):
        assert hook in documented, f"docs/plugin-api.md does not document hook {hook}"
        assert documented[hook] == signature(hook), (
            f"docs/plugin-api.md writes hook {hook} as\n  {documented[hook]}\n"
            f"but dranet_cloud/contract/hookspecs.py declares\n  {signature(hook)}"
        )
    stale = sorted(set(documented) - HOOK_NAMES)
    assert stale == [], f"docs/plugin-api.md documents functions that are no hooks: {stale}"


def endpoint_sections() -> dict[tuple[str, str], list[tuple[str, Any]]]:
    """(method, path) -> its example blocks in order: ``("request"|"answer", JSON)``."""
    text = doc_text()
    heads = list(SECTION.finditer(text))
    out: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for head, nxt in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end() : nxt.start() if nxt else text.index("\n## ", head.end())]
        out[(head[1], head[2])] = [(kind, json.loads(doc)) for kind, doc in BLOCK.findall(body)]
    return out


def exchanges(blocks: list[tuple[str, Any]]) -> list[tuple[Any, Any]]:
    """``(request, answer)`` pairs in order; ``None`` where the doc shows none (a GET
    has no body; an answer not shown is a 200 with an empty body)."""
    out: list[tuple[Any, Any]] = []
    for kind, doc in blocks:
        if kind == "answer" and out and out[-1][1] is None and out[-1][0] is not None:
            out[-1] = (out[-1][0], doc)
        else:
            out.append((doc, None) if kind == "request" else (None, doc))
    return out


def ranged(doc: Any) -> Any:
    """``doc`` with each allocated address replaced by the range it was drawn from.

    The IPAM starts its search at a random point of a range (so a freed address
    is not handed out again at once): the doc's addresses are one session's,
    and a new session's must come from the same ranges, GCE's alias range
    (a /24 here) and its IPv6 subinterface range (a /80).
    """
    if not isinstance(doc, dict) or "interface" not in doc:
        return doc
    addresses = doc["interface"].get("addresses", [])
    drawn = [
        str(ipaddress.ip_interface(a).network.supernet(new_prefix=24 if ":" not in a else 80))
        for a in addresses
    ]
    return {**doc, "interface": {**doc["interface"], "addresses": drawn}}


def test_every_endpoint_the_server_serves_has_a_section_with_examples(tmp_path: Path) -> None:
    host = ProviderHost(
        cloud_provider_hint="none",
        profile_provider="none",
        host_root=str(tmp_path),
        registry=PluginRegistry(load_entry_points=False),
        env={},
    )
    host.start()
    app = create_app(host)
    served = {("GET", "/health")} | {(r.method, p) for p, r in app._routes.items()}
    sections = endpoint_sections()
    assert set(sections) == served, (
        f"endpoints served: {sorted(served)}; documented in docs/plugin-api.md: {sorted(sections)}"
    )
    for (method, path), blocks in sections.items():
        pairs = exchanges(blocks)
        assert pairs, f"{method} {path}: no example"
        for request, answer in pairs:
            assert (request is None) == (method == "GET"), f"{method} {path}: {request}"
            if path != "/ReleaseProfileConfig":  # answered 200 with an empty body
                assert answer is not None, f"{method} {path}: no answer shown for {request}"


@pytest.fixture
def gce_server(tmp_path: Path) -> Iterator[ServeProcess]:
    """``dranet-cloud serve`` on the GCE sample node, pointed at the GCE emulator."""
    reg = PluginRegistry()
    sample = reg.call("gce", "sample_host", dest=tmp_path / "node", variant=None)
    emu = reg.call("gce", "emulator", fixture=None, listen="127.0.0.1:0", faults=None)
    with emu:
        args = ("--cloud-provider-hint", "gce", "--host-root", str(sample.root))
        server = ServeProcess(tmp_path, *args, ranges=(), env=emu.env)
        try:
            yield server
        finally:
            server.kill()


def test_the_examples_are_what_the_server_answers(gce_server: ServeProcess) -> None:
    """The doc's exchanges, in its order, as DRANET's Go client sends them."""
    client = gce_server.client()
    try:
        for (method, path), blocks in endpoint_sections().items():
            for request, answer in exchanges(blocks):
                got = client.http.get(path) if method == "GET" else client.post(path, request)
                assert got.status_code == 200, f"{method} {path}: {got.status_code} {got.text}"
                if answer is None:
                    assert got.content == b"", f"{method} {path}: {got.text}"
                    continue
                assert ranged(got.json()) == ranged(answer), (
                    f"{method} {path}: docs/plugin-api.md shows\n{json.dumps(answer)}\n"
                    f"but the server answered\n{got.text}"
                )
    finally:
        client.close()


def _cloud_table() -> dict[str, str]:
    """Hook -> its "cloud plugin" cell, from the table of what a cloud plugin must implement."""
    text = doc_text()
    start = text.index("What a cloud plugin must implement")
    rows: dict[str, str] = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        for hook in re.findall(r"`(\w+)`", cells[0]):
            rows[hook] = cells[1]
    return rows


def test_the_doc_and_the_conformance_kit_require_the_same_cloud_hooks() -> None:
    """What plugin-api.md calls required of a cloud plugin is what the kit checks, no more."""
    from dranet_cloud.host.plugin_manager import ROLE_HOOKS
    from dranet_cloud.testing.conformance import CLOUD_REQUIRED, PluginConformance

    table = _cloud_table()
    assert set(table) <= set(HOOK_NAMES), set(table) - set(HOOK_NAMES)
    required = {h for h, cell in table.items() if cell == "required"}
    assert required == {*ROLE_HOOKS["cloud"], *CLOUD_REQUIRED}
    assert (
        table["device_config"].startswith("optional")
        and "has_device_config = False" in (table["device_config"])
    )
    assert PluginConformance.has_device_config is True  # the default the table describes
    assert table["confirm_environment"] == "optional"


def test_the_layout_section_says_what_is_required_and_what_is_convention() -> None:
    """A single plugin.py is a complete plugin (the README's are), and the section says so."""
    text = doc_text()
    start = text.index("\n## Plugin layout\n")
    section = text[start : text.find("\n## ", start + 1)]
    assert "Required of every plugin" in section and "one\n`plugin.py` is a complete plugin" in (
        section
    )
    assert "Convention, for the plugins of this repository" in section
    assert "checks only the seven plugins under\n`plugins/`" in section
    readme = (DOC.parents[1] / "README.md").read_text()
    files = re.findall(r"^# file: (\S+)$", readme, re.M)
    modules = [f for f in files if f.endswith(".py") and "/tests/" not in f and "__init__" not in f]
    assert len(modules) == 2 and all(f.endswith("/plugin.py") for f in modules), modules
