"""Whether bfloat16 training gets a warning: by the CPU's flags and oneDNN's ISA limit."""

from convs2s_tf.training import cpu_features


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n")
    assert cpu_features.cpu_flags(str(cpuinfo)) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_features.cpu_flags(str(tmp_path / "missing")) is None


def test_bfloat16_training_is_warned_about_only_without_the_instructions():
    assert cpu_features.bfloat16_warning({"avx512_bf16"}, environ={}) is None
    assert cpu_features.bfloat16_warning({"amx_bf16"}, environ={}) is None
    warning = cpu_features.bfloat16_warning({"avx2", "avx512f"}, environ={})
    assert "avx512_bf16" in warning and "--training_dtype=float32" in warning
    limited = {"ONEDNN_MAX_CPU_ISA": "avx512_core"}
    assert cpu_features.bfloat16_warning({"avx512_bf16"}, environ=limited) is not None
    # A CPU with no flags at all has none of them.
    assert cpu_features.has_bfloat16_units(set(), environ={}) is False
