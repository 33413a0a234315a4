"""No module of dranet_cloud or of a plugin imports a module that imports it back.

A circle makes the import order decide what exists when a module runs (the
half-initialised module of the first import is what the second one sees),
hides which of two modules is the contract and which the user, and stops
either from being read, tested or moved alone.  The walk reads every
``import`` with :mod:`ast`, at module level, inside functions (a
function-level import closes a circle as surely, only later) and under ``if
TYPE_CHECKING:`` (such an import never runs, but the two modules still
depend on each other: a type both need belongs in a third module).  An
import of a package counts as an edge to its ``__init__``; the implicit
import of a module's parent packages does not (Python runs those first,
whatever imports what).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # path:line
    kind: str  # "module", "function" or "typing" (under if TYPE_CHECKING:)


def plugin_packages() -> list[Path]:
    """Every plugin package (a directory with ``__init__.py``: an editable
    install leaves ``dranet_cloud_<x>.egg-info`` beside it in a fresh clone)."""
    return sorted(p.parent for p in ROOT.glob("plugins/*/dranet_cloud_*/__init__.py"))


def package_roots() -> list[Path]:
    """The core package and every plugin package."""
    return [ROOT / "dranet_cloud", *plugin_packages()]


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of every package."""
    out: dict[str, Path] = {}
    for root in package_roots():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement, and where it sits: "module", "function" or "typing"."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, kind))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for inner in child.body:
                    visit(ast.Module(body=[inner], type_ignores=[]), "typing")
                for other in child.orelse:
                    visit(ast.Module(body=[other], type_ignores=[]), kind)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, "typing" if kind == "typing" else "function")
            else:
                visit(child, kind)

    visit(tree, "module")
    return found


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_edges(modules: dict[str, Path]) -> list[Edge]:
    """Every edge between two of ``modules``, one per import statement and target."""
    edges: list[Edge] = []
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, kind in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _absolute(name, is_package, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            for target in dict.fromkeys(targets):
                if target in modules and target != name:
                    edges.append(Edge(name, target, where, kind))
    return edges


def circles(edges: list[Edge]) -> list[list[Edge]]:
    """One circle (a list of edges, each ending where the next starts) per
    strongly connected group of modules, found by Tarjan's algorithm."""
    graph: dict[str, list[Edge]] = {}
    for edge in edges:
        graph.setdefault(edge.source, []).append(edge)
        graph.setdefault(edge.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for edge in graph[node]:
            if edge.target not in index:
                connect(edge.target)
                low[node] = min(low[node], low[edge.target])
            elif edge.target in on_stack:
                low[node] = min(low[node], index[edge.target])
        if low[node] == index[node]:
            group: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_one_circle(graph, group) for group in groups]


def _one_circle(graph: dict[str, list[Edge]], group: set[str]) -> list[Edge]:
    """A shortest circle through the group's first module (breadth first)."""
    start = min(group)
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for edge in graph[node]:
                if edge.target not in group:
                    continue
                if edge.target == start:
                    path = [edge]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                if edge.target not in came:
                    came[edge.target] = edge
                    following.append(edge.target)
        frontier = following
    raise AssertionError(f"no circle through {start} in {sorted(group)}")


def describe(circle: list[Edge]) -> str:
    steps = " -> ".join([circle[0].source, *(e.target for e in circle)])
    notes = {"module": "", "function": " (inside a function)", "typing": " (if TYPE_CHECKING)"}
    lines = [f"  {e.source} imports {e.target} at {e.where}{notes[e.kind]}" for e in circle]
    return "\n".join([steps, *lines])


def test_the_walk_sees_every_kind_of_import() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"
        "from .c import thing\n"
        "import pkg.d\n"
        "if TYPE_CHECKING:\n"
        "    from .e import Hint\n"
        "def f():\n"
        "    from .f import late\n"
        "class K:\n"
        "    def g(self):\n"
        "        import pkg.h\n"
    )
    found = [
        (_absolute("pkg.a", False, n) if isinstance(n, ast.ImportFrom) else n.names[0].name, kind)
        for n, kind in _imports(ast.parse(source))
    ]
    assert found == [
        ("typing", "module"),
        ("pkg", "module"),
        ("pkg.c", "module"),
        ("pkg.d", "module"),
        ("pkg.e", "typing"),
        ("pkg.f", "function"),
        ("pkg.h", "function"),
    ]


def test_a_circle_is_found_and_named_with_its_lines() -> None:
    edges = [
        Edge("p.a", "p.b", "a.py:1", "module"),
        Edge("p.b", "p.c", "b.py:2", "function"),
        Edge("p.c", "p.a", "c.py:3", "typing"),
        Edge("p.c", "p.d", "c.py:4", "module"),
    ]
    (circle,) = circles(edges)
    assert describe(circle).splitlines()[0] == "p.a -> p.b -> p.c -> p.a"
    assert "p.b imports p.c at b.py:2 (inside a function)" in describe(circle)
    assert "p.c imports p.a at c.py:3 (if TYPE_CHECKING)" in describe(circle)
    assert circles(edges[:2] + edges[3:]) == []


def test_the_walk_covers_the_core_and_every_plugin() -> None:
    modules = module_files()
    assert "dranet_cloud.ipam.node.sqlite" in modules and "dranet_cloud.testing" in modules
    plugins = {name.split(".")[0] for name in modules if name.startswith("dranet_cloud_")}
    assert len(plugins) == len(plugin_packages()) >= 7
    edges = import_edges(modules)
    assert any(
        e.source == "dranet_cloud.host.provider_host" and e.target == "dranet_cloud.node.nic"
        for e in edges
    )
    assert {"module", "function"} <= {e.kind for e in edges}


def test_no_module_imports_one_that_imports_it_back() -> None:
    found = circles(import_edges(module_files()))
    assert not found, (
        "import circles (break each by moving what both sides need into a module of its "
        "own, or by passing it in):\n" + "\n".join(describe(c) for c in found)
    )


# The commands that exist to run the kit's emulators; no other product module may need it.
RUNS_EMULATORS = {"dranet_cloud.cli.emulate_cmd", "dranet_cloud.cli.demo_cmd"}


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_test_kit_and_the_command_line_depend_on_the_host_layer_not_on_each_other() -> None:
    """The kit builds hosts as the CLI does (dranet_cloud.host.assembly), so neither reaches
    into the other: a node's daemon never loads test code, and a change to a command's
    internals never breaks a plugin's tests.  A type named under ``if TYPE_CHECKING:``
    (the hook contracts name the kit's Emulator) is never imported at run time."""
    kit, cli = "dranet_cloud.testing", "dranet_cloud.cli"
    product = [m for m in module_files() if _in(m, "dranet_cloud") and not _in(m, kit)]
    wrong = [
        e
        for e in import_edges(module_files())
        if e.kind != "typing"
        and (
            (e.source in product and e.source not in RUNS_EMULATORS and _in(e.target, kit))
            or (_in(e.source, kit) and _in(e.target, cli))
        )
    ]
    assert not wrong, "\n".join(f"{e.source} imports {e.target} at {e.where}" for e in wrong)


# The layers of the core, lowest first: a module may import its own layer and
# the layers below it, never one above.  The toolkits know nothing of the
# project; the wire models and the node's view build on them; the Kubernetes
# client and the IPAM store build on those; the contract (what a hook is
# handed and returns) names the services a plugin may use; the built-in
# providers implement it; the host loads and calls plugins; the server and the
# test kit drive the host, and the command line offers them all.
LAYERS = (
    "toolkit",
    "wire",
    "node",
    "kube",
    "ipam",
    "contract",
    "providers",
    "host",
    "server",
    "testing",
    "cli",
)
# What a plugin package may import of the core (and the test kit, only from
# its emulator and sample modules, which a node daemon never loads).
PLUGIN_LAYERS = frozenset({"toolkit", "wire", "node", "kube", "ipam", "contract", "providers"})
PLUGIN_TEST_KIT_MODULES = frozenset({"emulator", "sample"})


def layer(module: str) -> str | None:
    """The core layer a module belongs to; None for the package root (the
    version only) and for a plugin's modules."""
    parts = module.split(".")
    if parts[0] != "dranet_cloud" or len(parts) == 1:
        return None
    return parts[1]


def layer_violations(edges: list[Edge]) -> list[str]:
    """Every import that runs upward, and every plugin import outside what a plugin may use."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    found: list[str] = []
    for e in edges:
        source, target = layer(e.source), layer(e.target)
        if target is None:
            continue
        if source is not None:
            if rank[source] < rank[target]:
                found.append(f"{e.where}: {e.source} ({source}) imports {e.target} ({target})")
        elif target == "testing":
            if e.source.rsplit(".", 1)[-1] not in PLUGIN_TEST_KIT_MODULES:
                found.append(f"{e.where}: plugin module {e.source} imports the test kit {e.target}")
        elif target not in PLUGIN_LAYERS:
            found.append(f"{e.where}: plugin module {e.source} imports {e.target} ({target})")
    return found


def test_every_core_module_lives_in_a_layer() -> None:
    flat = [m for m in module_files() if m.startswith("dranet_cloud.") and layer(m) not in LAYERS]
    assert not flat, f"modules outside the layers {LAYERS}: {flat}"


def test_the_layer_rule_catches_an_upward_import() -> None:
    edges = [
        Edge("dranet_cloud.host.x", "dranet_cloud.toolkit.y", "x.py:1", "module"),
        Edge("dranet_cloud.contract.x", "dranet_cloud.testing.y", "x.py:2", "typing"),
        Edge("dranet_cloud_acme.plugin", "dranet_cloud.host.z", "p.py:3", "function"),
        Edge("dranet_cloud_acme.emulator", "dranet_cloud.testing", "e.py:4", "module"),
        Edge("dranet_cloud_acme.routing", "dranet_cloud.testing.q", "r.py:5", "module"),
    ]
    assert layer_violations(edges) == [
        "x.py:2: dranet_cloud.contract.x (contract) imports dranet_cloud.testing.y (testing)",
        "p.py:3: plugin module dranet_cloud_acme.plugin imports dranet_cloud.host.z (host)",
        "r.py:5: plugin module dranet_cloud_acme.routing imports the test kit "
        "dranet_cloud.testing.q",
    ]


def test_no_import_runs_from_a_lower_layer_to_a_higher_one() -> None:
    found = layer_violations(import_edges(module_files()))
    assert not found, (
        "imports against the layer order " + " < ".join(LAYERS) + " (move what the lower "
        "module needs down, or pass it in):\n  " + "\n  ".join(found)
    )
