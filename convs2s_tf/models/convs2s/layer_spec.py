"""Safe parsing of ConvS2S layer specs such as `[(512,3)]*9 + [(1024,3)]*4`.

Specs are user input (flags, configs, imported checkpoints), so they are parsed, never
evaluated: Python's own parser builds the syntax tree and only integer literals,
tuples, lists, `True`/`False`, `+` and `*` are interpreted. Every size is bounded (the
text, every list however it is built, channels, kernel widths), so that a crafted
checkpoint or config fails with one line instead of allocating without limit.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any, NamedTuple, NoReturn

# A spec longer than this is almost certainly a typo (and would exhaust memory).
MAX_LAYERS = 1000
# Twice the widest published ConvS2S block (fairseq's fconv_wmt_en_fr: 4096 channels).
MAX_CHANNELS = 8192
# ConvS2S kernels are 1 to 7 wide (fairseq's language models: 6).
MAX_KERNEL_WIDTH = 64
# Room for MAX_LAYERS layers written out in full, `(8192, 64, 1000), ` each.
MAX_SPEC_CHARS = 20 * MAX_LAYERS


class LayerSpec(NamedTuple):
    """One convolutional block: output channels, kernel width and residual
    distance (how many blocks back the residual comes from; 1 = previous block, 0 = none)."""

    channels: int
    kernel_width: int
    residual: int


class LayerSpecError(ValueError):
    """A malformed layer or attention spec."""


def _short(text: object, limit: int = 80) -> str:
    """`repr(text)`, its middle elided if longer than `limit` (errors stay one line)."""
    shown = repr(text)
    if len(shown) <= limit:
        return shown
    return f"{shown[: limit // 2]}...{shown[-limit // 2 :]}"


def _quote(text: str, node: ast.AST) -> str:
    segment = ast.get_source_segment(text, node)
    return segment if segment is not None else text


def _fail(text: str, node: ast.AST, why: str) -> NoReturn:
    raise LayerSpecError(f"Invalid spec {_short(text)}: {why} in {_short(_quote(text, node))}.")


def _bounded(text: str, node: ast.AST, items: list) -> list:
    """`items`, if a spec may hold that many (checked on every list however it is built)."""
    if len(items) > MAX_LAYERS:
        _fail(text, node, f"more than MAX_LAYERS={MAX_LAYERS} layers")
    return items


def _evaluate_sum(text: str, node: ast.BinOp) -> list:
    """`a + b + c + ...`, walked without recursion so that a long chain is no deeper than
    one `+` (and each partial sum is bounded, so no chain can grow past MAX_LAYERS)."""
    terms = []
    first: ast.expr = node
    while isinstance(first, ast.BinOp) and isinstance(first.op, ast.Add):
        terms.append(first.right)
        first = first.left
    total = _evaluate(text, first)
    for term in reversed(terms):
        right = _evaluate(text, term)
        if not isinstance(total, list) or not isinstance(right, list):
            _fail(text, term, "'+' joins two lists")
        total = _bounded(text, term, total + right)
    return total


def _evaluate(text: str, node: ast.AST) -> Any:
    """Interprets the allowed subset of expressions; anything else is rejected."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or isinstance(node.value, int):
            return node.value
        _fail(text, node, "only integers and True/False are allowed")
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_evaluate(text, element) for element in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else _bounded(text, node, items)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _evaluate_sum(text, node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _evaluate(text, node.left), _evaluate(text, node.right)
        if isinstance(left, int) and isinstance(right, list):
            left, right = right, left
        if isinstance(left, list) and isinstance(right, int) and not isinstance(right, bool):
            if right < 0 or len(left) * right > MAX_LAYERS:
                _fail(text, node, f"a repeat must give 0 to MAX_LAYERS={MAX_LAYERS} layers")
            return left * right
        _fail(text, node, "'*' repeats a list a whole number of times")
    _fail(text, node, f"unsupported syntax ({type(node).__name__})")


def _parse(text: str) -> Any:
    if not isinstance(text, str) or not text.strip():
        raise LayerSpecError(f"Invalid spec {_short(text)}: it is empty.")
    if len(text) > MAX_SPEC_CHARS:
        raise LayerSpecError(
            f"Invalid spec {_short(text)}: {len(text)} characters, more than "
            f"MAX_SPEC_CHARS={MAX_SPEC_CHARS}."
        )
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _evaluate(text.strip(), tree.body)
    except SyntaxError as error:
        raise LayerSpecError(f"Invalid spec {_short(text)}: {error.msg}.") from None
    except RecursionError:
        # Python's parser recurses once per operator of a chain such as `[x] * 1 * 1 ...`.
        raise LayerSpecError(f"Invalid spec {_short(text)}: nested too deeply.") from None


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
        raise LayerSpecError(f"Invalid spec {_short(text)}: expected a non-empty list of tuples.")
    layers = []
    for index, item in enumerate(value):
        if (
            not isinstance(item, tuple)
            or len(item) not in (2, 3)
            or any(isinstance(x, bool) or not isinstance(x, int) for x in item)
        ):
            raise LayerSpecError(
                f"Invalid spec {_short(text)}: layer {index} is {_short(item)}; expected "
                "(channels, kernel_width) or (channels, kernel_width, residual) of integers."
            )
        channels, kernel_width, residual = item if len(item) == 3 else item + (1,)
        if channels <= 0 or kernel_width <= 0:
            raise LayerSpecError(
                f"Invalid spec {_short(text)}: layer {index} {item!r} needs positive channels and "
                "kernel width."
            )
        if channels > MAX_CHANNELS or kernel_width > MAX_KERNEL_WIDTH:
            raise LayerSpecError(
                f"Invalid spec {_short(text)}: layer {index} {item!r} exceeds "
                f"MAX_CHANNELS={MAX_CHANNELS} channels or MAX_KERNEL_WIDTH={MAX_KERNEL_WIDTH}."
            )
        if not 0 <= residual <= index + 1:
            raise LayerSpecError(
                f"Invalid spec {_short(text)}: layer {index} {item!r} has residual distance "
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
        raise LayerSpecError(f"Invalid spec {_short(layers)}: expected a list of integer tuples.")
    if len(items) > MAX_LAYERS:
        raise LayerSpecError(
            f"Invalid spec: {len(items)} layers, more than MAX_LAYERS={MAX_LAYERS}."
        )
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
