"""Peer comparisons on one machine: `fairseq` (decoding speed and faithfulness),
`fairseq_training` (training speed), `ctranslate2` (a fairseq Transformer on
CTranslate2); `fairseq_tools` is what they share."""
