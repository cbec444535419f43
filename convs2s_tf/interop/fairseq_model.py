"""The `ConvS2S` of a fairseq `fconv` checkpoint: its config, built and filled."""

from collections.abc import Mapping
from typing import Any

from convs2s_tf.interop.fairseq_checkpoint import (
    FairseqImportError,
    fconv_settings,
    model_arguments,
    read_checkpoint,
)
from convs2s_tf.interop.fairseq_dictionary import Dictionary
from convs2s_tf.interop.fairseq_weights import assign_weights
from convs2s_tf.models import ConvS2S
from convs2s_tf.models.convs2s.layer_spec import (
    LayerSpec,
    LayerSpecError,
    format_layer_spec,
    parse_attention_spec,
    parse_layer_spec,
)
from convs2s_tf.vocabulary import PAD_ID


def _shape(state_dict: Mapping[str, Any], key: str) -> tuple[int, ...]:
    if key not in state_dict:
        raise FairseqImportError(f"The checkpoint has no parameter {key!r}.")
    return tuple(state_dict[key].shape)


def _shares_output_embedding(state_dict: Mapping[str, Any]) -> bool:
    """Whether decoder.fc3 is the decoder's token table (a tied, plain weight)."""
    if "decoder.fc3.weight" not in state_dict or "decoder.embed_tokens.weight" not in state_dict:
        return False
    table, output = state_dict["decoder.embed_tokens.weight"], state_dict["decoder.fc3.weight"]
    return tuple(table.shape) == tuple(output.shape) and bool((table == output).all())


def _layer_spec(settings: Mapping[str, Any], side: str) -> list[LayerSpec]:
    text = settings[f"{side}_layers"]
    try:
        return parse_layer_spec(text if isinstance(text, str) else repr(list(text)))
    except LayerSpecError as error:
        raise FairseqImportError(f"The checkpoint's {side}_layers: {error}") from None


def model_config(
    settings: Mapping[str, Any],
    state_dict: Mapping[str, Any],
    source_dictionary_size: int,
    target_dictionary_size: int,
) -> dict[str, Any]:
    """The `ConvS2S` arguments of a checkpoint, checked against its tensors.

    Sizes of vocabularies and position tables come from the tensors themselves; the
    layer specs, attention placement, dropout and sharing from the arguments.

    Raises:
        FairseqImportError: The arguments and tensors disagree, the dictionaries do not
            match the embedding tables, or the model has no `ConvS2S` equivalent.
    """
    encoder_layers = _layer_spec(settings, "encoder")
    decoder_layers = _layer_spec(settings, "decoder")
    try:
        attention = parse_attention_spec(settings["decoder_attention"], len(decoder_layers))
    except LayerSpecError as error:
        raise FairseqImportError(f"The checkpoint's decoder_attention: {error}") from None
    source_rows, embed_dim = _shape(state_dict, "encoder.embed_tokens.weight")
    target_rows, decoder_embed_dim = _shape(state_dict, "decoder.embed_tokens.weight")
    if embed_dim != decoder_embed_dim:
        raise FairseqImportError(
            f"Encoder and decoder embeddings differ in width ({embed_dim} vs "
            f"{decoder_embed_dim}); ConvS2S attention needs one width."
        )
    for side, rows, size in (
        ("source", source_rows, source_dictionary_size),
        ("target", target_rows, target_dictionary_size),
    ):
        if rows != size:
            raise FairseqImportError(
                f"The {side} dictionary has {size} symbols (4 special ones and "
                f"{size - 4} lines) but the checkpoint's {side} embedding table has {rows} "
                f"rows: pass the {side} dict.txt the model was trained with (fairseq-"
                "preprocess writes it to the data-bin directory)."
            )
    shared = _shares_output_embedding(state_dict)
    if bool(settings["share_input_output_embed"]) and not shared:
        raise FairseqImportError(
            "share_input_output_embed is set but the checkpoint's decoder.fc3 is not the "
            "decoder's token table."
        )
    out_embed_dim = _shape(state_dict, "decoder.fc2.bias")[0]
    dropout = float(settings["dropout"])
    if not 0.0 <= dropout < 1.0:
        raise FairseqImportError(f"dropout={dropout} is outside [0, 1).")
    return {
        "source_vocab_size": source_rows,
        "target_vocab_size": target_rows,
        "embed_dim": embed_dim,
        "encoder_layers": format_layer_spec(encoder_layers),
        "decoder_layers": format_layer_spec(decoder_layers),
        "decoder_out_embed_dim": out_embed_dim,
        "decoder_attention": attention,
        "dropout": dropout,
        "max_source_positions": _shape(state_dict, "encoder.embed_positions.weight")[0],
        "max_target_positions": _shape(state_dict, "decoder.embed_positions.weight")[0],
        "share_decoder_input_output_embed": shared,
        "source_positions": True,
        "target_positions": True,
        "pad_id": PAD_ID,
    }


def build_model(config: Mapping[str, Any]) -> ConvS2S:
    """A built `ConvS2S` of `config` (every variable created)."""
    model = ConvS2S(**config)
    model(model.dummy_inputs())
    return model


def load_fairseq_model(
    checkpoint_path: str, source_dictionary: Dictionary | str, target_dictionary: Dictionary | str
) -> tuple[ConvS2S, dict[str, Any], str, dict[str, Any]]:
    """Reads a fairseq `fconv` checkpoint into a `ConvS2S`.

    Args:
        checkpoint_path: The fairseq `.pt` file.
        source_dictionary: The source `Dictionary` (or the path of its dict.txt).
        target_dictionary: The target `Dictionary` (or path).

    Returns:
        `(model, config, architecture, arguments)`.
    """
    if isinstance(source_dictionary, str):
        source_dictionary = Dictionary.load(source_dictionary)
    if isinstance(target_dictionary, str):
        target_dictionary = Dictionary.load(target_dictionary)
    state = read_checkpoint(checkpoint_path)
    architecture, arguments = model_arguments(state)
    settings = fconv_settings(architecture, arguments)
    state_dict = state["model"]
    config = model_config(settings, state_dict, len(source_dictionary), len(target_dictionary))
    try:
        model = build_model(config)
    except ValueError as error:
        raise FairseqImportError(f"The checkpoint's model cannot be built: {error}") from None
    assign_weights(model, state_dict)
    return model, config, architecture, arguments
