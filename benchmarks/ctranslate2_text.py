"""Raw text in and out of a CTranslate2 model, as this project's translators take it."""


class TextTranslator:
    """Raw text to raw text through a `ctranslate2.Translator`, with the project's
    translators' result shape (a list of (text, score) lists, best first).

    Args:
        translator: The `ctranslate2.Translator`.
        processor: The `sentencepiece.SentencePieceProcessor` of its pieces.
        beam_size: Beam size.
        max_length: Most target pieces (fairseq's max_len_b).
        batch_size: Most sentences CTranslate2 decodes at once.
    """

    def __init__(self, translator, processor, beam_size=5, max_length=200, batch_size=128):
        self.translator = translator
        self.processor = processor
        self.beam_size = beam_size
        self.max_length = max_length
        self.batch_size = batch_size

    def translate(self, texts):
        results = self.translator.translate_batch(
            self.processor.encode(texts, out_type=str),
            beam_size=self.beam_size,
            max_batch_size=self.batch_size,
            max_decoding_length=self.max_length,
            return_scores=True,
        )
        return [
            [(self.processor.decode(result.hypotheses[0]), result.scores[0])] for result in results
        ]
