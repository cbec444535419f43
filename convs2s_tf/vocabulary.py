"""Special token ids shared by the tokenizer, the model and the decoder.

They follow the authors' implementation (fairseq dictionaries), so that checkpoints of
that implementation map onto this one id for id. SentencePiece is trained with exactly
these ids (its defaults would put `<unk>` at 0).
"""

BOS_ID = 0  # <s>: unused by ConvS2S itself, kept so the id layout matches fairseq.
PAD_ID = 1  # <pad>
EOS_ID = 2  # </s>: ends every source and target, and starts the decoder input.
UNK_ID = 3  # <unk>

BOS_PIECE = "<s>"
PAD_PIECE = "<pad>"
EOS_PIECE = "</s>"
UNK_PIECE = "<unk>"

NUM_SPECIAL_TOKENS = 4
