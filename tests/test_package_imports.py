"""No import cycle among the subpackages of `convs2s_tf`, nor among its modules.

The package graph has one node per subpackage (`convs2s_tf.decoding`, ...) or top-level
module (`convs2s_tf.vocabulary`) and an edge A -> B when a module of A imports one of B at
module level (class bodies included, function bodies not: those imports run on call, and
the library uses them to keep optional dependencies such as PyTorch lazy).

The module graph has one node per module (a package's `__init__` named as the package)
and an edge A -> B when A imports B anywhere, function bodies included: an import
deferred into a function still makes the two modules depend on each other, so a loop
through one is a loop of the design (`translator.py` once imported its own subclasses
that way). The source is parsed, not imported, so the checks see every module however it
is reached.

    python tests/test_package_imports.py    # prints both graphs and their cycles
"""

import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "convs2s_tf"


def _module_name(path, root=ROOT):
    relative = os.path.relpath(path, root)[: -len(".py")].split(os.sep)
    if relative[-1] == "__init__":
        relative = relative[:-1]
    return ".".join(relative)


def _node(module):
    """`convs2s_tf.X.y` -> `convs2s_tf.X`; None outside the package and for the root."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == PACKAGE and len(parts) > 1 else None


def _module_level(statements):
    """The statements run when a module is imported: not those inside functions."""
    for statement in statements:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield statement
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _module_level(getattr(statement, field, []))


def _imported_modules(path, in_functions=False, root=ROOT):
    """The absolute names of the modules `path` imports at module level (and, if
    `in_functions`, inside functions too)."""
    name = _module_name(path, root)
    is_package = path.endswith("__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    statements = ast.walk(tree) if in_functions else _module_level(tree.body)
    for statement in statements:
        if isinstance(statement, ast.Import):
            yield from (alias.name for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom):
            base = statement.module or ""
            if statement.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - statement.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            # `from convs2s_tf import vocabulary` imports the module convs2s_tf.vocabulary.
            yield from (f"{base}.{alias.name}" for alias in statement.names)


def package_graph(root=ROOT):
    """{node: set of nodes it imports} over every module of `convs2s_tf` under `root`."""
    graph = {}
    for directory, _, files in os.walk(os.path.join(root, PACKAGE)):
        for file_name in files:
            if not file_name.endswith(".py"):
                continue
            path = os.path.join(directory, file_name)
            source = _node(_module_name(path, root))
            if source is None:
                continue
            targets = graph.setdefault(source, set())
            for module in _imported_modules(path, root=root):
                target = _node(module)
                if target is not None and target != source:
                    targets.add(target)
    return graph


def _package_modules(root):
    """{module name: path} of every module of `convs2s_tf` under `root`."""
    modules = {}
    for directory, _, files in os.walk(os.path.join(root, PACKAGE)):
        for file_name in files:
            if file_name.endswith(".py"):
                path = os.path.join(directory, file_name)
                modules[_module_name(path, root)] = path
    return modules


def _ancestors(module):
    """`a.b.c` -> {`a`, `a.b`}: the packages Python initialises before `module`."""
    parts = module.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts))}


def module_graph(root=ROOT):
    """{module: set of modules of `convs2s_tf` it imports}, imports inside functions
    included.

    `from package import name` is an edge to the module `package.name` if there is one,
    else to the package (its `__init__`); importing a module of another package is an
    edge to that package's `__init__` too, which Python runs first (a module's own
    packages are initialised already)."""
    modules = _package_modules(root)
    graph = {}
    for source, path in modules.items():
        targets = graph.setdefault(source, set())
        for imported in _imported_modules(path, in_functions=True, root=root):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if not imported:
                continue
            found = {imported} | (_ancestors(imported) - _ancestors(source))
            targets.update(module for module in found if module in modules and module != source)
    return graph


def cycles(graph):
    """The strongly connected components of `graph` with more than one node, sorted."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def test_cycles_finds_a_cycle_and_only_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"b"}}) == []


def test_module_graph_counts_imports_inside_functions(tmp_path):
    package = tmp_path / PACKAGE / "sub"
    package.mkdir(parents=True)
    (tmp_path / PACKAGE / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from convs2s_tf.sub.a import A\n")
    (package / "a.py").write_text("class A:\n    def b(self):\n        from . import b\n")
    (package / "b.py").write_text("from convs2s_tf.sub.a import A\n")
    graph = module_graph(str(tmp_path))
    assert graph["convs2s_tf.sub"] == {"convs2s_tf.sub.a"}
    assert graph["convs2s_tf.sub.a"] == {"convs2s_tf.sub.b"}
    assert cycles(graph) == [["convs2s_tf.sub.a", "convs2s_tf.sub.b"]]
    # The package graph reads module-level imports only: no cycle there.
    assert cycles(package_graph(str(tmp_path))) == []


def test_no_import_cycle_among_the_modules():
    graph = module_graph()
    assert {"convs2s_tf.inference.translator", "convs2s_tf.inference.factory"} <= set(graph)
    assert cycles(graph) == []
    # The translator interface is the bottom of its package: its implementations and
    # their factory build on it, never the other way round.
    inference = [
        module
        for module in graph["convs2s_tf.inference.translator"]
        if module.startswith("convs2s_tf.inference")
    ]
    assert inference == []


def test_no_import_cycle_among_the_subpackages():
    graph = package_graph()
    # The check reads the packages the issue names, so a moved tree fails loudly.
    assert {"convs2s_tf.decoding", "convs2s_tf.export", "convs2s_tf.inference"} <= set(graph)
    assert "convs2s_tf.export" not in graph["convs2s_tf.decoding"]
    assert cycles(graph) == []


if __name__ == "__main__":
    failed = False
    for found in (package_graph(), module_graph()):
        for node in sorted(found):
            print(node, "->", ", ".join(sorted(found[node])) or "-")
        print("cycles:", cycles(found) or "none", end="\n\n")
        failed = failed or bool(cycles(found))
    sys.exit(1 if failed else 0)
