"""Opening translators: an export's warm-up requests replayed at load only when asked."""

import pytest

from convs2s_tf.inference import factory, open_translator, text_translators


@pytest.mark.slow  # over ten seconds on 2 cores
def test_an_export_replays_its_warm_up_requests_only_when_asked(exported, monkeypatch):
    replayed = []

    def replay(loaded, version_dir):
        replayed.append(version_dir)
        return 0.0

    monkeypatch.setattr(text_translators, "replay_warmup_requests", replay)
    cold = open_translator(saved_model=str(exported), warm_up=False)
    assert replayed == []
    warm = factory.open_saved_model(str(exported))
    # The newest version: other tests may add versions to the shared export.
    newest = max((p for p in exported.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    assert replayed == [str(newest)]
    texts = ["A dog runs.", "Two men talk in the street."]
    assert cold.translate(texts) == warm.translate(texts)
