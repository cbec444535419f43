"""Safe parsing of ConvS2S layer specs such as `[(512,3)]*9 + [(1024,3)]*4`.

Specs are user input (flags, configs, imported checkpoints), so they are parsed, never
evaluated: Python's own parser builds the syntax tree and only integer literals,
tuples, lists, `True`/`False`, `+` and `*` are interpreted.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any, NamedTuple, NoReturn

# A spec longer than this is almost certainly a typo (and would exhaust memory).
MAX_LAYERS = 1000


class LayerSpec(NamedTuple):
    """One convolutional block: output channels, kernel width and residual
    distance (how many blocks back the residual comes from; 1 = previous block, 0 = none)."""

    channels: int
    kernel_width: int
    residual: int


class LayerSpecError(ValueError):
    """A malformed layer or attention spec."""


def _quote(text: str, node: ast.AST) -> str:
    segment = ast.get_source_segment(text, node)
    return segment if segment is not None else text


def _fail(text: str, node: ast.AST, why: str) -> NoReturn:
    raise LayerSpecError(f"Invalid spec {text!r}: {why} in {_quote(text, node)!r}.")


def _evaluate(text: str, node: ast.AST) -> Any:
    """Interprets the allowed subset of expressions; anything else is rejected."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or isinstance(node.value, int):
            return node.value
        _fail(text, node, "only integers and True/False are allowed")
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_evaluate(text, element) for element in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _evaluate(text, node.left), _evaluate(text, node.right)
        if isinstance(node.op, ast.Add):
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            _fail(text, node, "'+' joins two lists")
        if isinstance(left, int) and isinstance(right, list):
            left, right = right, left
        if isinstance(left, list) and isinstance(right, int) and not isinstance(right, bool):
            if right < 0 or len(left) * right > MAX_LAYERS:
                _fail(text, node, f"repeat count must be between 0 and {MAX_LAYERS} layers")
            return left * right
        _fail(text, node, "'*' repeats a list a whole number of times")
    _fail(text, node, f"unsupported syntax ({type(node).__name__})")


def _parse(text: str) -> Any:
    if not isinstance(text, str) or not text.strip():
        raise LayerSpecError(f"Invalid spec {text!r}: it is empty.")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise LayerSpecError(f"Invalid spec {text!r}: {error.msg}.") from None
    return _evaluate(text.strip(), tree.body)


def parse_layer_spec(text: str) -> list[LayerSpec]:
    """Parses a layer spec into a list of `LayerSpec`.

    Args:
        text: E.g. `"[(512,3)]*9 + [(1024,3)]*4 + [(2048,1)]*2"`; each element is
            `(channels, kernel_width)` or `(channels, kernel_width, residual)`.

    Returns:
        A non-empty list of `LayerSpec`.

    Raises:
        LayerSpecError: Quoting the offending text.
    """
    value = _parse(text)
    if not isinstance(value, list) or not value:
        raise LayerSpecError(f"Invalid spec {text!r}: expected a non-empty list of tuples.")
    layers = []
    for index, item in enumerate(value):
        if (
            not isinstance(item, tuple)
            or len(item) not in (2, 3)
            or any(isinstance(x, bool) or not isinstance(x, int) for x in item)
        ):
            raise LayerSpecError(
                f"Invalid spec {text!r}: layer {index} is {item!r}; expected "
                "(channels, kernel_width) or (channels, kernel_width, residual) of integers."
            )
        channels, kernel_width, residual = item if len(item) == 3 else item + (1,)
        if channels <= 0 or kernel_width <= 0:
            raise LayerSpecError(
                f"Invalid spec {text!r}: layer {index} {item!r} needs positive channels and "
                "kernel width."
            )
        if not 0 <= residual <= index + 1:
            raise LayerSpecError(
                f"Invalid spec {text!r}: layer {index} {item!r} has residual distance "
                f"{residual}; it must be between 0 (none) and {index + 1} (the input)."
            )
        layers.append(LayerSpec(channels, kernel_width, residual))
    return layers


def normalise_layer_spec(layers: str | Sequence[Sequence[int]]) -> list[LayerSpec]:
    """Accepts a spec text or a list of tuples; returns a validated `LayerSpec` list."""
    if isinstance(layers, str):
        return parse_layer_spec(layers)
    try:
        items = [tuple(int(x) for x in layer) for layer in layers]
    except (TypeError, ValueError):
        raise LayerSpecError(f"Invalid spec {layers!r}: expected a list of integer tuples.")
    return parse_layer_spec(repr(items))


def format_layer_spec(layers: Sequence[LayerSpec]) -> str:
    """The canonical text of a list of `LayerSpec` (round-trips through the parser)."""
    items = []
    for layer in layers:
        if layer.residual == 1:
            items.append(f"({layer.channels}, {layer.kernel_width})")
        else:
            items.append(f"({layer.channels}, {layer.kernel_width}, {layer.residual})")
    return "[" + ", ".join(items) + "]"


def parse_attention_spec(spec: bool | str | Sequence[bool], num_layers: int) -> list[bool]:
    """Which decoder blocks have attention.

    Args:
        spec: `True`/`False` (all or none), a list of booleans, or their text
            (`"True"`, `"[True, False]*2"`).
        num_layers: Number of decoder blocks.

    Returns:
        A list of `num_layers` booleans.
    """
    value = _parse(spec) if isinstance(spec, str) else spec
    if isinstance(value, bool):
        return [value] * num_layers
    if (
        isinstance(value, (list, tuple))
        and len(value) == num_layers
        and all(isinstance(x, bool) for x in value)
    ):
        return list(value)
    raise LayerSpecError(
        f"Invalid attention spec {spec!r}: expected True, False or a list of {num_layers} "
        "booleans (one per decoder block)."
    )
