"""The package's shape: one import name, layers that import one way, no cycles.

Read from the source with `ast`, so imports inside functions count too.
"""
from __future__ import annotations

import ast
from pathlib import Path

import structgen

ROOT = Path(structgen.__file__).resolve().parent.parent  # the repository (or site-packages)
PACKAGES = {"structgen": "structgen", "structgen.fsm": "fsm", "structgen.kernels": "kernels",
            "structgen.engine": "engine", "structgen.guided": "guided"}
# (importer prefix, imported prefix) pairs that must never occur
FORBIDDEN = [
    ("structgen.fsm.core", "structgen.fsm.regex"), ("structgen.fsm.core", "structgen.fsm.grammar"),
    ("structgen.fsm.core", "structgen.fsm.json"), ("structgen.fsm.regex", "structgen.fsm.grammar"),
    ("structgen.fsm.regex", "structgen.fsm.json"), ("structgen.fsm.grammar", "structgen.fsm.json"),
    ("structgen.fsm", "structgen.engine"), ("structgen.fsm", "structgen.guided"),
    ("structgen.fsm", "structgen.kernels"), ("structgen.fsm", "torch"),
    ("structgen.kernels", "structgen.fsm"), ("structgen.kernels", "structgen.engine"),
    ("structgen.kernels", "structgen.guided"), ("structgen.engine", "structgen.guided"),
]


def _modules() -> dict[str, Path]:
    """{dotted module name: source file} of every module the wheel installs."""
    found = {}
    for pkg, folder in PACKAGES.items():
        base = ROOT / folder if (ROOT / folder / "__init__.py").exists() else ROOT / pkg.replace(".", "/")
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([pkg, *parts])
            if pkg == "structgen" and parts:  # the root package's own folder holds no subpackages
                name = "structgen." + ".".join(parts)
            found[name] = path
    return found


MODULES = _modules()


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (never run)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _imports(name: str, path: Path) -> list[tuple[str, tuple[str, ...], int]]:
    """(absolute module, names imported from it, line) for every import that runs,
    inside functions too. `from package import submodule` imports the submodule (and the
    package only if another name comes from it)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree)
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, (), node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            names = tuple(a.name for a in node.names)
            submodules = [n for n in names if f"{module}.{n}" in MODULES]
            out += [(f"{module}.{n}", (), node.lineno) for n in submodules]
            if len(submodules) < len(names):
                out.append((module, tuple(n for n in names if n not in submodules), node.lineno))
    return out


def _edges() -> dict[str, set[str]]:
    graph = {m: set() for m in MODULES}
    for m, path in MODULES.items():
        for target, _, _ in _imports(m, path):
            if target in MODULES and target != m:
                graph[m].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _subpackage(module: str) -> str:
    """The layer a module belongs to: structgen.fsm.<layer>, or its top package."""
    parts = module.split(".")
    return ".".join(parts[:3]) if module.startswith("structgen.fsm.") and len(parts) > 3 else ".".join(parts[:2])


def test_modules_are_found():
    assert {"structgen.fsm.core.automaton", "structgen.fsm.json.schema", "structgen.engine.llm",
            "structgen.guided.generate"} <= set(MODULES)


def test_no_import_cycles():
    assert _cycles(_edges()) == []


def test_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_layers_import_one_way():
    bad = []
    for m, path in MODULES.items():
        for target, _, line in _imports(m, path):
            for low, high in FORBIDDEN:
                if (m == low or m.startswith(low + ".")) and (target == high or target.startswith(high + ".")):
                    bad.append(f"{path.name}:{line} {m} imports {target}")
    assert bad == []


def test_no_private_name_crosses_a_layer():
    bad = []
    for m, path in MODULES.items():
        for target, names, line in _imports(m, path):
            if not target.startswith("structgen") or _subpackage(target) == _subpackage(m):
                continue
            bad += [f"{path.name}:{line} {m} imports {target}.{n}" for n in names
                    if n.startswith("_") and not n.startswith("__")]
    assert bad == []
