"""Peer comparisons on one machine: `fairseq` (decoding speed and faithfulness),
`fairseq_training` (training speed), `ctranslate2` (distilled students and a Transformer
on CTranslate2, `transformer`); `fairseq_tools` is what they share."""
