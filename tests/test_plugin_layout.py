"""Every plugin has the same module layout (the skeleton of docs/plugin-api.md).

A contributor who has read one plugin should find the same job under the same
name in the next: detection in ``detection.py`` (``local_evidence``,
``confirm``), the metadata source in ``metadata_source.py`` (``endpoint_from``,
``open_client``, ``load_instance``), the parsed instance in ``snapshot.py``,
the emulator and the sample node in ``emulator.py`` and ``sample.py``, and
the logic behind each hook the plugin answers in that hook's module.  The
checks read the source (``ast``), so they import nothing and say, per
plugin, what differs and where it belongs.

The same checker runs on a plugin made wrong on purpose
(:func:`test_the_checker_names_each_difference`), so a check that can no
longer fail does not go unnoticed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parent.parent
PLUGINS = REPO / "plugins"

# Modules every plugin package has.
MODULES = (
    "plugin.py",
    "detection.py",
    "metadata_source.py",
    "snapshot.py",
    "emulator.py",
    "sample.py",
)

# A hook the plugin implements -> the module that holds its logic (and that
# the thin hookimpl in plugin.py hands over to).
HOOK_MODULES = {
    "local_evidence": "detection",
    "confirm_environment": "detection",
    "instance_properties": "metadata_source",
    "device_attributes": "attributes",
    "device_config": "routing",
    "profile_config": "profile",
    "release_profile_config": "profile",
    "emulator": "emulator",
    "sample_host": "sample",
}


@dataclass(frozen=True)
class Signature:
    """A function the skeleton names: its positional parameters, then keyword-only ones."""

    positional: tuple[str, ...]
    keyword: tuple[str, ...] = ()

    def text(self, name: str) -> str:
        params = list(self.positional) + (["*", *self.keyword] if self.keyword else [])
        return f"{name}({', '.join(params)})"


FUNCTIONS: dict[str, dict[str, Signature]] = {
    "detection.py": {
        "local_evidence": Signature(("context",)),
        "confirm": Signature(("context", "timeout")),
    },
    "metadata_source.py": {
        "endpoint_from": Signature(("env",)),
        "open_client": Signature(("context",), ("timeout",)),
        "load_instance": Signature(("context", "deadline")),
    },
}

FACTORY = "PluginFixtures"
FACTORY_MODULE = "dranet_cloud.testing.plugin_fixtures"


def plugin_names() -> list[str]:
    return sorted(p.name for p in PLUGINS.iterdir() if (p / "pyproject.toml").is_file())


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _is_hookimpl_name(target: ast.expr) -> bool:
    return (isinstance(target, ast.Name) and target.id == "hookimpl") or (
        isinstance(target, ast.Attribute) and target.attr == "hookimpl"
    )


def _is_hookimpl(fn: ast.FunctionDef) -> bool:
    return any(
        _is_hookimpl_name(deco.func if isinstance(deco, ast.Call) else deco)
        for deco in fn.decorator_list
    )


def _hookimpls(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.Assign]:
    """plugin.py's hooks: ``@hookimpl`` functions, and ``name = hookimpl(module.function)``
    (a module's function that already takes the hook's arguments, marked as the hook)."""
    hooks: dict[str, ast.FunctionDef | ast.Assign] = {
        f.name: f for f in _functions(tree).values() if _is_hookimpl(f)
    }
    for node in tree.body:
        call = node.value if isinstance(node, ast.Assign) else None
        if isinstance(call, ast.Call) and _is_hookimpl_name(call.func):
            hooks.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
    return hooks


def _answers_a_constant(fn: ast.FunctionDef | ast.Assign) -> bool:
    """A hookimpl with no logic: its body is ``return <constant>`` (after a docstring).

    Such a hook (OCI's ``device_config`` that is always ``None``, say) has no
    logic to hold in a module of its own.
    """
    if isinstance(fn, ast.Assign):
        return False
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    return (
        len(body) == 1
        and isinstance(body[0], ast.Return)
        and (body[0].value is None or isinstance(body[0].value, ast.Constant))
    )


def _modules_reached(fn: ast.FunctionDef | ast.Assign) -> set[str]:
    """Sibling module names a function body imports from or refers to."""
    reached: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                reached.add(node.module.split(".")[0])
            else:
                reached.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Name):
            reached.add(node.id)
    return reached


def _params(fn: ast.FunctionDef) -> tuple[tuple[str, ...], tuple[str, ...]]:
    args = fn.args
    positional = tuple(a.arg for a in [*args.posonlyargs, *args.args])
    keyword = tuple(a.arg for a in args.kwonlyargs)
    return positional, keyword


def _signature_problem(fn: ast.FunctionDef, want: Signature, docstring: str) -> str | None:
    """Why ``fn`` does not have the skeleton's signature, or ``None`` when it does.

    Extra keyword-only parameters (with defaults) are allowed: a plugin may
    need more.  Any other difference must be explained in the module
    docstring, which names the function there.
    """
    positional, keyword = _params(fn)
    required_kw = {
        a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is None
    }
    if positional == want.positional and set(want.keyword) <= set(keyword):
        extra = required_kw - set(want.keyword)
        if not extra:
            return None
    if fn.name in docstring:
        return None  # the module says why this plugin needs another signature
    return (
        f"{fn.name}({', '.join(positional + (('*', *keyword) if keyword else ()))}) differs from "
        f"the skeleton's {want.text(fn.name)}; use the skeleton's parameters, or say in the "
        f"module docstring why {fn.name} needs others"
    )


def _conftest_problems(path: Path) -> list[str]:
    if not path.is_file():
        return [f"{path.name} is missing: its fixtures come from {FACTORY_MODULE}.{FACTORY}"]
    tree = _parse(path)
    imported = any(
        isinstance(n, ast.ImportFrom)
        and n.module == FACTORY_MODULE
        and any(a.name == FACTORY for a in n.names)
        for n in tree.body
    )
    kits = {
        t.id
        for n in tree.body
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
        and n.value.func.id == FACTORY
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    if not imported or not kits:
        return [
            f"tests/conftest.py does not build its fixtures with {FACTORY} "
            f"(from {FACTORY_MODULE} import {FACTORY}; kit = {FACTORY}(plugin))"
        ]
    problems = []
    made = 0
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        func = node.value.func
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in kits
        ):
            continue
        made += 1
        args = node.value.args
        name = args[0].value if args and isinstance(args[0], ast.Constant) else None
        targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if targets != [name]:
            problems.append(
                f"tests/conftest.py assigns the fixture {name!r} to {targets}: pytest finds "
                "it by the name it is given, a reader by the name it is assigned to"
            )
    if not made:
        problems.append(f"tests/conftest.py builds a {FACTORY} but makes no fixture with it")
    return problems


def layout_problems(root: Path) -> list[str]:
    """Every way the plugin at ``root`` (``plugins/<x>``) differs from the skeleton."""
    name = root.name
    package = root / f"dranet_cloud_{name}"
    problems: list[str] = []
    if not package.is_dir():
        return [f"no package dranet_cloud_{name}/"]
    for module in MODULES:
        if not (package / module).is_file():
            problems.append(f"dranet_cloud_{name}/{module} is missing")
    readme = root / "README.md"
    if not readme.is_file():
        problems.append("README.md is missing")
    elif not readme.read_text(encoding="utf-8").startswith(f"# dranet-cloud-{name}\n"):
        problems.append(f"README.md does not start with '# dranet-cloud-{name}'")
    pyproject = root / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")) if pyproject.is_file() else {}
    entry = project.get("project", {}).get("entry-points", {}).get("dranet_cloud", {})
    if entry != {name: f"dranet_cloud_{name}.plugin"}:
        problems.append(
            f"pyproject.toml's dranet_cloud entry points are {entry}, not "
            f"{{{name!r}: 'dranet_cloud_{name}.plugin'}}"
        )
    for module, wanted in FUNCTIONS.items():
        path = package / module
        if not path.is_file():
            continue
        tree = _parse(path)
        docstring = ast.get_docstring(tree) or ""
        found = _functions(tree)
        for fname, sig in wanted.items():
            if fname not in found:
                if f"no ``{fname}``" not in docstring:
                    problems.append(
                        f"dranet_cloud_{name}/{module} has no {sig.text(fname)} (module-level); "
                        f"write it, or say in the module docstring why there is no ``{fname}``"
                    )
                continue
            why = _signature_problem(found[fname], sig, docstring)
            if why:
                problems.append(f"dranet_cloud_{name}/{module}: {why}")
    plugin_py = package / "plugin.py"
    if plugin_py.is_file():
        hooks = _hookimpls(_parse(plugin_py))
        for hook, module in HOOK_MODULES.items():
            if hook not in hooks or _answers_a_constant(hooks[hook]):
                continue
            if not (package / f"{module}.py").is_file():
                problems.append(
                    f"the {hook} hook is implemented, so dranet_cloud_{name}/{module}.py "
                    "must hold its logic, and it is missing"
                )
            elif module not in _modules_reached(hooks[hook]):
                problems.append(
                    f"plugin.py's {hook} does not hand over to .{module} (keep hookimpls thin: "
                    f"the logic of {hook} lives in {module}.py)"
                )
    problems += _conftest_problems(root / "tests" / "conftest.py")
    return problems


@pytest.mark.parametrize("plugin", plugin_names())
def test_plugin_follows_the_skeleton(plugin: str) -> None:
    problems = layout_problems(PLUGINS / plugin)
    assert not problems, f"plugins/{plugin} differs from the plugin skeleton:\n- " + "\n- ".join(
        problems
    )


def test_the_plugins_are_found() -> None:
    """The seven plugins the repository ships, found by their pyproject.toml."""
    assert plugin_names() == ["aliyun", "aws", "azure", "cks", "gce", "oci", "webhook"]


def test_the_docs_describe_the_same_skeleton() -> None:
    """docs/plugin-api.md's "Plugin layout" section names what this test checks."""
    text = (REPO / "docs" / "plugin-api.md").read_text(encoding="utf-8")
    start = text.index("\n## Plugin layout\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    names = [*MODULES, *(f"{m}.py" for m in HOOK_MODULES.values()), FACTORY, "README.md"]
    for functions in FUNCTIONS.values():
        names += [sig.text(f) for f, sig in functions.items()]
    missing = [n for n in dict.fromkeys(names) if n not in section]
    assert not missing, f"the Plugin layout section of docs/plugin-api.md omits {missing}"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_the_checker_names_each_difference(tmp_path: Path) -> None:
    """A plugin that strays in every way the skeleton forbids gets one line per way."""
    root = tmp_path / "acme"
    pkg = root / "dranet_cloud_acme"
    _write(
        root / "pyproject.toml",
        '[project]\nname = "dranet-cloud-acme"\n'
        '[project.entry-points.dranet_cloud]\nacme = "dranet_cloud_acme.hooks"\n',
    )
    _write(
        pkg / "plugin.py",
        "from dranet_cloud.contract.hookspecs import hookimpl\n"
        "from . import detection\n\n"
        "@hookimpl\ndef local_evidence(context):\n    return detection.local_evidence(context)\n\n"
        "@hookimpl\ndef device_attributes(context, instance, device):\n    return {}\n\n"
        "@hookimpl\ndef device_config(context, instance, device):\n    return {'mtu': 9000}\n\n"
        '@hookimpl\ndef profile_config(context):\n    """Nothing to add."""\n    return None\n'
        "instance_properties = hookimpl(detection.local_evidence)\n",
    )
    _write(
        pkg / "detection.py",
        '"""Detection."""\n\ndef local_evidence(host_root):\n    return None\n',
    )
    _write(
        pkg / "metadata_source.py",
        '"""Metadata."""\n\ndef endpoint_for(env):\n    pass\n\n'
        "def open_client(context, timeout):\n    pass\n\n"
        "def load_instance(context, deadline, *, strict):\n    pass\n",
    )
    _write(pkg / "attributes.py", "")
    _write(root / "tests" / "conftest.py", "import pytest\n")
    got = layout_problems(root)
    expected = [
        "dranet_cloud_acme/snapshot.py is missing",
        "dranet_cloud_acme/emulator.py is missing",
        "dranet_cloud_acme/sample.py is missing",
        "README.md is missing",
        "pyproject.toml's dranet_cloud entry points",
        "detection.py: local_evidence(host_root) differs from the skeleton's local_evidence(",
        "detection.py has no confirm(context, timeout)",
        "metadata_source.py has no endpoint_from(env)",
        "metadata_source.py: open_client(context, timeout) differs",
        "metadata_source.py: load_instance(context, deadline, *, strict) differs",
        "plugin.py's device_attributes does not hand over to .attributes",
        "plugin.py's instance_properties does not hand over to .metadata_source",
        "the device_config hook is implemented, so dranet_cloud_acme/routing.py must hold",
        "tests/conftest.py does not build its fixtures with PluginFixtures",
    ]
    for want in expected:
        assert any(want in line for line in got), f"no problem says {want!r} in {got}"
    assert len(got) == len(expected), got


def test_a_function_left_out_on_purpose_is_said_so(tmp_path: Path) -> None:
    """Absent from metadata_source.py is fine when its docstring says why (CKS's open_client)."""
    path = tmp_path / "plugins" / "acme" / "dranet_cloud_acme" / "metadata_source.py"
    body = "def endpoint_from(env):\n    pass\n\ndef load_instance(context, deadline):\n    pass\n"
    _write(path, '"""The Node is the source; a client would only wrap it."""\n' + body)
    (problem,) = [p for p in layout_problems(path.parent.parent) if "metadata_source" in p]
    assert "has no open_client(context, *, timeout)" in problem
    _write(path, '"""The Node is the source: there is no ``open_client`` (see why)."""\n' + body)
    assert not [p for p in layout_problems(path.parent.parent) if "metadata_source" in p]


def test_a_conftest_fixture_under_another_name_is_refused(tmp_path: Path) -> None:
    conftest = tmp_path / "conftest.py"
    _write(
        conftest,
        f"from {FACTORY_MODULE} import {FACTORY}\nfrom dranet_cloud_acme import plugin\n"
        f"kit = {FACTORY}(plugin)\nacme_emulator = kit.emulator('acme_emulator')\n"
        "acme_host = kit.sample('acme_sample')\n",
    )
    (problem,) = _conftest_problems(conftest)
    assert "'acme_sample' to ['acme_host']" in problem
