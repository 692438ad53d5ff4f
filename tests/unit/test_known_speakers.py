"""Known speakers without models: the matching rule, labels of named columns, the form fields, the library."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

from voxserve.errors import InvalidInput
from voxserve.pipelines.known_speakers import KnownSpeaker, check_known, match_names, similarities
from voxserve.pipelines.speaker_turns import frames_to_turns
from voxserve.server.errors import HttpError
from voxserve.server.known_speaker_fields import check_known_fields, data_url_bytes
from voxserve.server.voice_library import VoiceLibrary


def _unit(*v: float) -> np.ndarray:
    x = np.asarray(v, dtype=np.float32)
    return x / np.linalg.norm(x)


def test_greedy_matching_gives_one_name_per_cluster_and_one_cluster_per_name() -> None:
    sims = np.array([[0.9, 0.85, 0.1],
                     [0.88, 0.7, 0.2],
                     [0.3, 0.2, 0.5]], dtype=np.float32)
    names = match_names(sims, ["ann", "bob", "cy"], threshold=0.6)
    # ann goes to cluster 0 (0.9, the best pair); cluster 1 then takes bob (0.7), not ann again
    assert names == {0: "ann", 1: "bob"}
    # nothing reaches a higher threshold but the best pair; a weak match never names
    assert match_names(sims, ["ann", "bob", "cy"], threshold=0.89) == {0: "ann"}
    assert match_names(sims, ["ann", "bob", "cy"], threshold=0.95) == {}
    assert match_names(np.zeros((0, 2), np.float32), ["a", "b"], 0.5) == {}


def test_similarities_are_cosines_of_unit_vectors() -> None:
    known = [KnownSpeaker("x", _unit(1, 0), "e"), KnownSpeaker("y", _unit(0, 1), "e")]
    sims = similarities(np.stack([_unit(1, 1), _unit(1, 0) * 3]), known)
    assert sims == pytest.approx(np.array([[0.7071, 0.7071], [1.0, 0.0]]), abs=1e-4)


def test_check_known_refuses_repeats_other_embedders_and_sizes() -> None:
    a = KnownSpeaker("a", _unit(1, 0), "campplus")
    check_known([a], "campplus", 2)
    for known, embedder, dim in (([a, a], None, None), ([a], "resemblyzer", None), ([a], "campplus", 3),
                                 ([KnownSpeaker(" ", _unit(1, 0), "e")], None, None)):
        with pytest.raises(InvalidInput) as err:
            check_known(known, embedder, dim)
        assert err.value.param == "known_speaker_names"


def test_named_columns_keep_their_name_and_the_others_letters_in_order() -> None:
    binary = np.zeros((30, 3), np.float32)
    binary[0:10, 0] = 1  # first speaker: unnamed -> A
    binary[10:20, 1] = 1  # named
    binary[20:30, 2] = 1  # unnamed -> B
    turns, labels = frames_to_turns(binary, 160, 400, 30 * 160, names={1: "Alice"})
    assert labels == ("A", "Alice", "B")
    assert [t.speaker for t in turns] == ["A", "Alice", "B"]


def test_form_fields_shape_is_checked_with_the_param() -> None:
    url = "data:audio/wav;base64," + base64.b64encode(b"RIFF....").decode()
    assert check_known_fields([" Ann ", "Bob"], [url, url]) == (("Ann", "Bob"), (url, url))
    assert check_known_fields(["Ann"], []) == (("Ann",), ())  # from the voice library
    cases = [
        ([], [url], "known_speaker_references"),  # references without names
        (["Ann", "Bob"], [url], "known_speaker_references"),  # counts differ
        (["Ann", "Ann"], [], "known_speaker_names"),
        ([str(i) for i in range(17)], [], "known_speaker_names"),  # over the maximum
        (["Ann"], ["https://example.com/ann.wav"], "known_speaker_references"),  # not a data URL
        (["Ann"], ["data:text/plain;base64,aGk="], "known_speaker_references"),  # not audio
        (["Ann"], ["data:audio/wav;base64,@@@"], "known_speaker_references"),  # bad base64
    ]
    for names, refs, param in cases:
        with pytest.raises(HttpError) as err:
            check_known_fields(names, refs)
        assert err.value.status == 422 and err.value.param == param, (names, refs)
    assert data_url_bytes("data:audio/wav;base64,UklGRg==") == b"RIFF"


def test_voice_library_keeps_embeddings_per_embedder(tmp_path: Path) -> None:
    lib = VoiceLibrary(tmp_path / "voices.sqlite3")
    assert lib.list() == [] and lib.get("ann", "campplus") is None
    lib.put(KnownSpeaker("ann", _unit(1, 2, 3), "campplus", 4.5))
    lib.put(KnownSpeaker("ann", _unit(3, 2, 1), "resemblyzer", 4.5))
    lib.put(KnownSpeaker("bob", _unit(1, 1, 1), "campplus", 2.0))
    got = lib.get("ann", "campplus")
    assert got is not None and np.allclose(got.embedding, _unit(1, 2, 3)) and got.speech_s == 4.5
    assert [(v.name, v.embedders) for v in lib.list()] == [("ann", ("campplus", "resemblyzer")), ("bob", ("campplus",))]
    assert lib.delete("ann") and not lib.delete("ann")
    assert [v.name for v in VoiceLibrary(tmp_path / "voices.sqlite3").list()] == ["bob"]
