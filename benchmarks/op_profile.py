"""Reads a TensorFlow profiler trace of a beam search into the parts of a step.

Used by `benchmarks.step_profile`. The trace (`*.xplane.pb`) holds one event per
operation run on the host: a TensorFlow kernel (`name:Type`) in graph mode, an XLA thunk
(an HLO instruction, its module in the `hlo_module` stat) in compiled code. XLA's HLO
dump (`--xla_dump_to`, text) names each instruction's TensorFlow op (`metadata=`), and a
fusion's fused computation says whether it holds a matrix product.
"""

import collections
import dataclasses
import glob
import os
import re

from convs2s_tf.decoding.search_step import REORDER_SCOPE, SELECTION_SCOPE

PARTS = ("products", "attention", "selection", "cache reordering", "bookkeeping")

# Operations that only run others (their own time is dispatch, counted as overhead).
_CONTAINER_TYPES = {
    "_XlaRun",
    "XlaLaunch",
    "_XlaCompile",
    "PartitionedCall",
    "StatefulPartitionedCall",
    "While",
    "StatelessWhile",
    "If",
    "StatelessIf",
    "Case",
    "StatelessCase",
}
_CONTAINER_OPCODES = {"while", "conditional", "call", "async-start", "async-done"}
_TF_OP = re.compile(r"^(?P<name>[^:]+):(?P<type>_?[A-Z]\w*)$")


@dataclasses.dataclass(frozen=True)
class Operation:
    """What a profiled operation is: its TensorFlow op (name with scopes, type) and
    whether it is a matrix product."""

    op_name: str
    op_type: str
    product: bool


@dataclasses.dataclass
class StepProfile:
    """A profiled search's time by part.

    Attributes:
        wall_seconds: The requests' wall time.
        steps: Iterations of the search loop (summed over the requests).
        sentence_steps: Steps summed over the sentences in the batch.
        part_seconds: {part: seconds of its operations}, parts as in `PARTS`.
        busy_seconds: Time in which at least one operation runs.
    """

    wall_seconds: float
    steps: int
    sentence_steps: int
    part_seconds: dict
    busy_seconds: float

    @property
    def overhead_seconds(self):
        return max(0.0, self.wall_seconds - self.busy_seconds)

    def as_dict(self):
        per_step = {part: self.per_step_us(seconds) for part, seconds in self._parts().items()}
        return {
            "wall_seconds": round(self.wall_seconds, 4),
            "steps": self.steps,
            "sentence_steps": self.sentence_steps,
            "step_us": self.per_step_us(self.wall_seconds),
            "part_us_per_step": per_step,
            "part_share": {
                part: round(seconds / self.wall_seconds, 4)
                for part, seconds in self._parts().items()
            },
        }

    def per_step_us(self, seconds):
        return round(1e6 * seconds / max(self.steps, 1), 1)

    def _parts(self):
        return dict(self.part_seconds, overhead=self.overhead_seconds)


def part_of(operation):
    """The part of a step `operation` belongs to (see `PARTS`), by the search's name scopes
    and the op's kind."""
    scopes = operation.op_name.split("/")
    if REORDER_SCOPE in scopes:
        return "cache reordering"
    if SELECTION_SCOPE in scopes:
        return "selection"
    activations_product = "BatchMatMul" in operation.op_type or operation.op_type == "Einsum"
    if operation.product and not activations_product:
        return "products"
    if any("attention" in scope for scope in scopes):
        return "attention"
    return "bookkeeping"


_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+) = (?P<rest>.*)$")
_OPCODE = re.compile(r"(?:^|[\s}\]])(?P<opcode>[a-z][a-z0-9\-]*)\(")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_PRODUCT_OPCODES = {"dot", "convolution"}


def _metadata(rest, key):
    found = re.search(key + r'="([^"]*)"', rest)
    return found.group(1) if found else ""


def _is_product(opcode, rest):
    if opcode in _PRODUCT_OPCODES:
        return True
    target = _metadata(rest, "custom_call_target").lower()
    return opcode == "custom-call" and ("matmul" in target or "conv" in target)


def read_hlo_module(text):
    """`(module name, {instruction: Operation})` of one optimised HLO text dump."""
    module = re.search(r"^HloModule\s+([\w.\-]+)", text, re.MULTILINE).group(1)
    computations = collections.defaultdict(list)  # name -> [(name, opcode, rest)]
    current = None
    for line in text.splitlines():
        header = _COMPUTATION.match(line)
        if header and not line.startswith(" "):
            current = header.group("name")
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction and current:
            rest = instruction.group("rest")
            opcode = _OPCODE.search(rest)
            computations[current].append(
                (instruction.group("name"), opcode.group("opcode") if opcode else "", rest)
            )
    operations = {}
    for instructions in computations.values():
        for name, opcode, rest in instructions:
            op_type, op_name = _metadata(rest, "op_type"), _metadata(rest, "op_name")
            product = _is_product(opcode, rest)
            called = re.search(r"calls=%?([\w.\-]+)", rest)
            if opcode == "fusion" and called:
                for _, inner_opcode, inner_rest in computations.get(called.group(1), []):
                    if _is_product(inner_opcode, inner_rest):
                        # A fusion around a product is the product (its op is the dot's).
                        product = True
                        op_type = _metadata(inner_rest, "op_type") or op_type
                        op_name = _metadata(inner_rest, "op_name") or op_name
                        break
            if opcode in _CONTAINER_OPCODES:
                operations[name] = None
            else:
                operations[name] = Operation(op_name, op_type, product)
    return module, operations


def read_hlo_dump(dump_dir):
    """{module name: {instruction: Operation or None (a container)}} of every optimised
    module in an XLA text dump."""
    modules = {}
    for path in glob.glob(os.path.join(dump_dir, "*after_optimizations.txt")):
        with open(path, encoding="utf-8") as f:
            module, operations = read_hlo_module(f.read())
        modules[module] = operations
    return modules


def _stat_value(stat, stat_names):
    kind = stat.WhichOneof("value")
    if kind == "ref_value":  # a string kept once in the plane's stat metadata
        return stat_names.get(stat.ref_value)
    return getattr(stat, kind) if kind else None


def _trace_events(log_dir):
    """Every host event of the trace under `log_dir`: `(line id, start ps, end ps, name,
    stats)`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = glob.glob(os.path.join(log_dir, "**", "*.xplane.pb"), recursive=True)
    if not paths:
        raise FileNotFoundError(f"no profiler trace (*.xplane.pb) under {log_dir}")
    events = []
    for path in paths:
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            if not plane.name.startswith("/host:"):
                continue
            stat_names = {key: value.name for key, value in plane.stat_metadata.items()}
            for line in plane.lines:
                base = line.timestamp_ns * 1000
                for event in line.events:
                    metadata = plane.event_metadata[event.metadata_id]
                    stats = {
                        stat_names.get(s.metadata_id): _stat_value(s, stat_names)
                        for s in event.stats
                    }
                    start = base + event.offset_ps
                    events.append((line.id, start, start + event.duration_ps, metadata.name, stats))
    return events


def _operation(name, stats, modules):
    """The `Operation` an event ran, None for a container, or False for an event that is
    not an operation."""
    hlo_op = stats.get("hlo_op")
    if hlo_op is not None or stats.get("hlo_module") is not None:
        module = modules.get(stats.get("hlo_module"), {})
        instruction = hlo_op or name
        if instruction in module:
            return module[instruction]
        return Operation(instruction, "", False)
    matched = _TF_OP.match(name)
    if not matched:
        return False
    if matched.group("type") in _CONTAINER_TYPES:
        return None
    op_type = matched.group("type")
    product = "MatMul" in op_type or "Conv" in op_type or op_type == "Einsum"
    return Operation(matched.group("name"), op_type, product)


def _exclusive(events):
    """Each event's time without the events nested in it on its line (ps)."""
    exclusive = [end - start for _, start, end, _, _ in events]
    by_line = collections.defaultdict(list)
    for index, (line, start, end, _, _) in enumerate(events):
        by_line[line].append((start, -end, index))
    for entries in by_line.values():
        entries.sort()
        stack = []
        for start, negative_end, index in entries:
            while stack and events[stack[-1]][2] <= start:
                stack.pop()
            if stack:
                exclusive[stack[-1]] -= -negative_end - start
            stack.append(index)
    return exclusive


def _union_ps(intervals):
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def operation_seconds(log_dir, modules=None):
    """Every operation of the trace under `log_dir` with its exclusive seconds, and the
    seconds in which at least one ran: `([(Operation, seconds)], busy_seconds)`.

    Args:
        log_dir: The profiler's log directory.
        modules: `read_hlo_dump`'s instructions, naming XLA thunks (without: an XLA
            thunk is an `Operation` of type "" named after its HLO instruction).
    """
    events = _trace_events(log_dir)
    operations = [_operation(name, stats, modules or {}) for _, _, _, name, stats in events]
    kept = [(e, o) for e, o in zip(events, operations) if o is not False]
    exclusive = _exclusive([event for event, _ in kept])
    timed, leaves = [], []
    for (event, operation), picoseconds in zip(kept, exclusive):
        if operation is None:
            continue  # a container's own time is dispatch
        timed.append((operation, picoseconds * 1e-12))
        leaves.append((event[1], event[2]))
    return timed, _union_ps(leaves) * 1e-12


def step_profile(log_dir, dump_dir, wall_seconds, steps, sentence_steps):
    """The `StepProfile` of the trace under `log_dir` (an XLA text dump in `dump_dir`)."""
    timed, busy_seconds = operation_seconds(log_dir, read_hlo_dump(dump_dir))
    part_seconds = dict.fromkeys(PARTS, 0.0)
    for operation, seconds in timed:
        part_seconds[part_of(operation)] += seconds
    return StepProfile(
        wall_seconds=wall_seconds,
        steps=steps,
        sentence_steps=sentence_steps,
        part_seconds=part_seconds,
        busy_seconds=busy_seconds,
    )


def format_profile(profile):
    """A table of `profile`'s parts: microseconds per step and share of the wall time."""
    figures = profile.as_dict()
    rows = [
        f"  {part:<18} {figures['part_us_per_step'][part]:>10.1f} us"
        f" {100 * figures['part_share'][part]:>6.1f}%"
        for part in (*PARTS, "overhead")
    ]
    rows.append(
        f"  {'step (wall)':<18} {figures['step_us']:>10.1f} us"
        f"  ({profile.steps} steps, {profile.sentence_steps} sentence steps)"
    )
    return "\n".join(rows)
