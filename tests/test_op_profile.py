"""benchmarks.op_profile's reading of traces and HLO dumps, on hand-made inputs (the
whole benchmark runs in tests/test_benchmarks.py)."""

from benchmarks import op_profile
from benchmarks.op_profile import Operation

# An optimised HLO module as XLA's text dump writes it: a product fused with its bias.
HLO = """HloModule a_inference__search_loop_7__.45, entry_computation_layout={()->f32[5,8]}

%fused_computation (param_0: f32[5,4], param_1: f32[4,8]) -> f32[5,8] {
  %param_0 = f32[5,4]{1,0} parameter(0)
  %param_1 = f32[4,8]{1,0} parameter(1)
  ROOT %dot.1 = f32[5,8]{1,0} dot(f32[5,4]{1,0} %param_0, f32[4,8]{1,0} %param_1), \
lhs_contracting_dims={1}, rhs_contracting_dims={0}, \
metadata={op_type="MatMul" op_name="while/decoder_step/MatMul_3"}
}

ENTRY %main.9 (Arg_0.1: f32[5,4], Arg_1.2: f32[4,8]) -> f32[5,8] {
  %Arg_0.1 = f32[5,4]{1,0} parameter(0)
  %Arg_1.2 = f32[4,8]{1,0} parameter(1)
  %gather.3 = f32[5,4]{1,0} gather(f32[5,4]{1,0} %Arg_0.1, s32[5]{0} %c), \
metadata={op_type="GatherV2" op_name="while/reorder_cache/GatherV2"}
  %while.4 = (s32[]) while((s32[]) %t), condition=%cond, body=%body
  ROOT %fusion.2 = f32[5,8]{1,0} fusion(f32[5,4]{1,0} %gather.3, f32[4,8]{1,0} %Arg_1.2), \
kind=kOutput, calls=%fused_computation, metadata={op_type="AddV2" op_name="while/add"}
}
"""


def test_hlo_fusions_around_products_are_products_and_loops_are_containers():
    module, operations = op_profile.read_hlo_module(HLO)
    assert module == "a_inference__search_loop_7__.45"
    assert operations["fusion.2"] == Operation("while/decoder_step/MatMul_3", "MatMul", True)
    assert operations["gather.3"] == Operation("while/reorder_cache/GatherV2", "GatherV2", False)
    assert operations["while.4"] is None


def test_parts_follow_the_search_scopes_and_the_kind_of_op():
    assert op_profile.part_of(Operation("while/reorder_cache/GatherV2", "GatherV2", False)) == (
        "cache reordering"
    )
    assert op_profile.part_of(Operation("while/selection/TopKV2", "TopKV2", False)) == "selection"
    assert op_profile.part_of(Operation("decoder_step/attention_1/MatMul", "MatMul", True)) == (
        "products"
    )
    scores = Operation("decoder_step/attention_1/MatMul", "BatchMatMulV2", True)
    assert op_profile.part_of(scores) == "attention"
    assert op_profile.part_of(Operation("bookkeeping/Where", "SelectV2", False)) == "bookkeeping"


def test_exclusive_time_leaves_out_nested_events_on_the_same_line():
    events = [
        (1, 0, 100, "while", {}),
        (1, 10, 30, "dot", {}),
        (1, 40, 50, "gather", {}),
        (2, 20, 60, "other thread", {}),
    ]
    assert op_profile._exclusive(events) == [70, 20, 10, 40]
    assert op_profile._union_ps([(10, 30), (20, 60), (70, 80)]) == 60


def test_training_operations_fall_into_the_training_profiles_categories():
    from benchmarks.train_profile import category_of

    assert category_of(Operation("model/decoder/conv/MatMul", "_MklMatMul", True)) == "products"
    assert category_of(Operation("model/Cast_3", "Cast", False)) == "casts"
    assert category_of(Operation("fusion.7", "", False)) == "loss (XLA)"
    assert category_of(Operation("FusedSGD/update", "ResourceApplyKerasMomentum", False)) == (
        "optimiser"
    )
    assert category_of(Operation("CollectiveReduceV2", "CollectiveReduceV2", False)) == (
        "all-reduce"
    )
    assert category_of(Operation("IteratorGetNext", "IteratorGetNext", False)) == ("input pipeline")
    assert category_of(Operation("model/dropout/Mul", "Mul", False)) == (
        "elementwise and reductions"
    )
