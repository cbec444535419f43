"""No import cycle among the subpackages of `convs2s_tf`.

The graph has one node per subpackage (`convs2s_tf.decoding`, ...) or top-level module
(`convs2s_tf.vocabulary`) and an edge A -> B when a module of A imports one of B at module
level (class bodies included, function bodies not: those imports run on call, and the
library uses them to keep optional dependencies such as PyTorch lazy). The source is
parsed, not imported, so the check sees every module however it is reached.

    python tests/test_package_imports.py    # prints the graph and its cycles
"""

import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "convs2s_tf"


def _module_name(path):
    relative = os.path.relpath(path, ROOT)[: -len(".py")].split(os.sep)
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


def _imported_modules(path):
    """The absolute names of the modules `path` imports at module level."""
    name = _module_name(path)
    is_package = path.endswith("__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for statement in _module_level(tree.body):
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
            source = _node(_module_name(path))
            if source is None:
                continue
            targets = graph.setdefault(source, set())
            for module in _imported_modules(path):
                target = _node(module)
                if target is not None and target != source:
                    targets.add(target)
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


def test_no_import_cycle_among_the_subpackages():
    graph = package_graph()
    # The check reads the packages the issue names, so a moved tree fails loudly.
    assert {"convs2s_tf.decoding", "convs2s_tf.export", "convs2s_tf.inference"} <= set(graph)
    assert "convs2s_tf.export" not in graph["convs2s_tf.decoding"]
    assert cycles(graph) == []


if __name__ == "__main__":
    found = package_graph()
    for node in sorted(found):
        print(node, "->", ", ".join(sorted(found[node])) or "-")
    print("cycles:", cycles(found) or "none")
    sys.exit(1 if cycles(found) else 0)
