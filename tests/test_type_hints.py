"""The public API is annotated: every function and method exported from a package's
`__init__.py` has a type for each parameter and for its return.

"Exported" means listed in the package's `__all__` (or, without one, a public name the
package defines); a class counts with every public method, property, `__init__` and
`__call__` it or a `convs2s_tf` base class defines. mypy (`scripts/run_tests.sh`,
configured in pyproject.toml) checks that the annotations hold, and requires them of every
function in the packages its `disallow_untyped_defs` override lists; mypy cannot single
out the exported API, so this test makes sure new API cannot land without them anywhere.
"""

import importlib
import inspect
import pkgutil

import pytest

import convs2s_tf

PACKAGE = "convs2s_tf"
# Methods checked besides the public ones (whose names do not start with "_").
CHECKED_DUNDERS = ("__init__", "__call__")


def packages():
    """`convs2s_tf` and the names of all its subpackages, sorted."""
    found = pkgutil.walk_packages(convs2s_tf.__path__, prefix=f"{PACKAGE}.")
    return [PACKAGE] + sorted(info.name for info in found if info.ispkg)


def _defined_here(value):
    return getattr(value, "__module__", "").split(".")[0] == PACKAGE


def exported(package):
    """{name: object} of what `package` exports and the library defines."""
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name in vars(module) if not name.startswith("_")]
    values = {name: getattr(module, name) for name in names}
    return {
        name: value
        for name, value in values.items()
        if (inspect.isclass(value) or callable(value)) and _defined_here(value)
    }


def _functions(member):
    """The plain functions behind a class member (a property gives its accessors)."""
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if isinstance(member, property):
        return [f for f in (member.fget, member.fset, member.fdel) if f is not None]
    # tf.function-decorated methods: the Python function they trace.
    member = getattr(member, "python_function", member)
    return [member] if inspect.isfunction(member) else []


def api_functions():
    """`(qualified name, function)` of every exported function and class method."""
    found = {}
    for package in packages():
        for name, value in exported(package).items():
            if not inspect.isclass(value):
                found[f"{package}.{name}"] = value
                continue
            for base in reversed(value.__mro__):
                if not _defined_here(base):
                    continue
                for attribute, member in vars(base).items():
                    if attribute.startswith("_") and attribute not in CHECKED_DUNDERS:
                        continue
                    for function in _functions(member):
                        found[f"{package}.{name}.{attribute}"] = function
    return sorted(found.items())


def missing_annotations(function):
    """The parameters of `function` without a type (and "return" if it has none)."""
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())
    if parameters and parameters[0].name in ("self", "cls"):
        parameters = parameters[1:]
    missing = [p.name for p in parameters if p.annotation is inspect.Parameter.empty]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_the_api_is_found():
    names = {name for name, _ in api_functions()}
    assert "convs2s_tf.models.ConvS2S.__init__" in names
    assert "convs2s_tf.decoding.beam_search" in names
    assert "convs2s_tf.training.Trainer.train" in names
    assert "convs2s_tf.export.TranslationModule.translate" in names


def test_missing_annotations_names_what_is_missing():
    def untyped(self, a, b: int, *args, **kwargs: int):
        pass

    def typed(a: int, *, b: str = "") -> None:
        pass

    assert missing_annotations(untyped) == ["a", "args", "return"]
    assert missing_annotations(typed) == []


API = api_functions()


@pytest.mark.parametrize("name, function", API, ids=[name for name, _ in API])
def test_public_api_is_annotated(name, function):
    missing = missing_annotations(function)
    assert not missing, f"{name} lacks annotations for: {', '.join(missing)}"
