"""The house rules of the packages' source: imports run one way, each subpackage is used
through its face (its ``__init__``), and functions stay short.

The rules read the source (``ast``), not the running program: an import is where a module
names another. An import under ``if TYPE_CHECKING:`` is for annotations only and runs never;
one inside a module's own ``__getattr__`` is a name the package hands on when asked (PEP 562:
the lazy exports and the deprecated names of a face), not a dependency of its code.
"""

from __future__ import annotations

import ast
import collections
import pathlib
from collections.abc import Iterator

REPO = pathlib.Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 100


def _modules() -> list[pathlib.Path]:
    return sorted(p for p in REPO.glob("*/*/src/**/*.py") if ".venv" not in p.parts)


def _name(path: pathlib.Path) -> str:
    """The dotted module name of a source file (``zoo_train.loop._trainer``)."""
    src = next(p for p in path.parents if p.name == "src")
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(path: pathlib.Path) -> str:
    """The package a module's relative imports start from."""
    name = _name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import of a module that can run: at module level, or when a function runs."""

    def walk(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if node is tree and isinstance(child, ast.FunctionDef) and child.name == "__getattr__":
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            yield from walk(child)

    yield from walk(tree)


def _targets(path: pathlib.Path, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    """The modules of this tree an import names (the module itself when it names a package's
    attribute)."""
    if isinstance(node, ast.Import):
        found = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            up = _package(path).split(".")
            up = up[: len(up) - (node.level - 1)]
            base = ".".join([*up, base] if base else up)
        found = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = []
    for target in found:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target:
            out.append(target)
    return out


def _unit(module: str) -> str:
    """What the one-way rule orders: a package's subpackage or top-level module
    (``zoo_train.loop``, ``zoo_train._loss``)."""
    return ".".join(module.split(".")[:2])


def _graph() -> dict[tuple[str, str], tuple[str, str]]:
    """``(unit, unit it imports) -> (module, module)``: the units' imports, lazy ones too, with
    one import that makes each."""
    modules = _modules()
    known = {_name(p) for p in modules}
    edges: dict[tuple[str, str], tuple[str, str]] = {}
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            for target in _targets(path, node, known):
                a, b = _unit(_name(path)), _unit(target)
                if a != b:
                    edges.setdefault((a, b), (_name(path), target))
    return edges


def _circles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    after = collections.defaultdict(list)
    for a, b in edges:
        after[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in after[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted({a for a, _ in edges} | {b for _, b in edges}):
        if v not in index:
            visit(v)
    return found


def test_there_are_package_sources_to_check():
    packages = {p.relative_to(REPO).parts[:2] for p in _modules()}
    assert len(packages) >= 6, packages


def test_imports_run_one_way():
    """No subpackage or top-level module imports, even lazily, one that imports it back: each
    package's parts stand in layers (the command line at the top, the step and the mesh at the
    bottom)."""
    edges = _graph()
    circles = _circles(set(edges))
    shown = [
        [f"{a} -> {b} ({' imports '.join(edges[(a, b)])})" for a in c for b in c if (a, b) in edges]
        for c in circles
    ]
    assert not circles, f"import circles: {shown}"


def test_the_rule_sees_a_circle_made_by_a_lazy_import():
    # The check above can fail: a loop made of one module-level and one lazy import is one.
    assert _circles({("pkg.a", "pkg.b"), ("pkg.b", "pkg.a"), ("pkg.b", "pkg.c")}) == [
        ["pkg.a", "pkg.b"]
    ]


def test_a_subpackage_is_used_through_its_face():
    """A module imports another subpackage's names from its ``__init__`` (the face that says
    what others may use), never from the subpackage's private modules."""
    modules = _modules()
    known = {_name(p) for p in modules}
    reaching = []
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        mine = _package(path)
        for node in _imports(tree):
            for target in _targets(path, node, known):
                parts = target.split(".")
                private = [i for i, part in enumerate(parts) if i and part.startswith("_")]
                if not private:
                    continue
                owner = ".".join(parts[: private[0]])
                if owner.count(".") and not (mine == owner or mine.startswith(owner + ".")):
                    reaching.append(f"{_name(path)} imports {target}")
    assert not reaching, reaching


def test_every_function_is_under_100_lines():
    long = {}
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = node.end_lineno - first + 1  # type: ignore[operator]
                if lines >= MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(REPO)}:{node.name}"] = lines
    assert not long, f"functions of {MAX_FUNCTION_LINES} lines or more (split them): {long}"


#: Module names a package may repeat: the same job in sibling subpackages of the same kind
#: (each contract of zoo_attention has its spec, kernel base, registry, entry point and
#: conformance suite; each objective of zoo_train its loss).
SAME_JOB = {
    "zoo_attention": {
        "_api", "_bad_inputs", "_cases", "_check", "_kernel", "_reference", "_registry",
        "_spec", "_suite", "_verify",
    },
    "zoo_train": {"_loss"},
}  # fmt: skip


def test_no_two_modules_of_a_package_share_a_name_for_different_jobs():
    seen: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for path in _modules():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        name = _name(path)
        top, stem = name.split(".")[0], name.rpartition(".")[2]
        seen[top, stem].append(name)
    shared = {
        key: names
        for key, names in seen.items()
        if len(names) > 1 and key[1] not in SAME_JOB.get(key[0], set())
    }
    assert not shared, f"modules of one package that share a name: {shared}"
