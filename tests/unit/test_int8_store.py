"""The int8 copy of a float16 CTranslate2 model: the file format round trip, the quantization rule, and when a
copy is made, reused or remade (built models; the real model's equivalence is in the integration tests)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from voxserve.backends.asr.int8_store import MODEL_BIN, ModelFile, int8_copy, quantize_int8, read_model, write_model
from voxserve.errors import ModelUnavailable


def _model() -> ModelFile:
    rng = np.random.default_rng(0)
    weight = rng.normal(0, 0.05, (6, 4)).astype(np.float16)
    weight[2] = 0  # an all-zero row keeps a finite scale
    return ModelFile("WhisperSpec", 3, {
        "encoder/num_heads": np.array(8, np.int16),
        "encoder/conv1/weight": rng.normal(0, 0.1, (4, 3, 3)).astype(np.float16),  # rank 3: kept as saved
        "encoder/layer_0/ffn/linear_0/weight": weight,
        "encoder/layer_0/ffn/linear_0/bias": rng.normal(0, 0.1, 6).astype(np.float16),
        "encoder/layer_norm/gamma": np.ones(4, np.float16),
        "decoder/embeddings/weight": rng.normal(0, 1, (5, 4)).astype(np.float16),
    }, {"decoder/projection/weight": "decoder/embeddings/weight"})


def test_a_model_file_reads_back_as_written(tmp_path: Path) -> None:
    model = _model()
    write_model(tmp_path / MODEL_BIN, model)
    back = read_model(tmp_path / MODEL_BIN)
    assert (back.spec, back.revision, back.aliases) == (model.spec, model.revision, model.aliases)
    assert list(back.variables) == list(model.variables)
    for name, value in model.variables.items():
        assert back.variables[name].dtype == value.dtype
        np.testing.assert_array_equal(back.variables[name], value)


def test_linear_weights_are_quantized_row_by_row_and_nothing_else() -> None:
    model = _model()
    q = quantize_int8(model).variables
    assert {n for n, v in q.items() if v.dtype == np.int8} == {
        "encoder/layer_0/ffn/linear_0/weight", "decoder/embeddings/weight"}
    for name in ("encoder/layer_0/ffn/linear_0/weight", "decoder/embeddings/weight"):
        rows = model.variables[name].astype(np.float32)
        scale = q[f"{name}_scale"]
        assert scale.dtype == np.float32 and np.all(np.isfinite(scale))
        assert np.abs(q[name]).max() == 127  # each nonzero row spans the int8 range
        nonzero = np.abs(rows).max(axis=1) > 0
        np.testing.assert_allclose(q[name][nonzero] / scale[nonzero, None], rows[nonzero],
                                   atol=float(np.abs(rows).max()) / 127)
    assert not q["encoder/layer_0/ffn/linear_0/weight"][2].any()
    for kept in ("encoder/conv1/weight", "encoder/layer_0/ffn/linear_0/bias", "encoder/layer_norm/gamma"):
        assert q[kept] is model.variables[kept]


def test_a_copy_is_made_once_and_remade_when_the_source_changes(tmp_path: Path) -> None:
    source, target = tmp_path / "src", tmp_path / "cache" / "int8"
    source.mkdir()
    write_model(source / MODEL_BIN, _model())
    (source / "config.json").write_text("{}")
    assert int8_copy(source, target) == target
    assert (target / "config.json").read_text() == "{}"
    assert read_model(target / MODEL_BIN).variables["decoder/embeddings/weight"].dtype == np.int8
    made = (target / MODEL_BIN).stat().st_mtime_ns
    assert int8_copy(source, target) == target and (target / MODEL_BIN).stat().st_mtime_ns == made  # reused
    changed = _model()
    changed.variables["decoder/embeddings/weight"] = -changed.variables["decoder/embeddings/weight"]
    write_model(source / MODEL_BIN, changed)
    os.utime(source / MODEL_BIN, ns=(made + 10**9, made + 10**9))
    int8_copy(source, target)
    np.testing.assert_array_equal(read_model(target / MODEL_BIN).variables["decoder/embeddings/weight"],
                                  quantize_int8(changed).variables["decoder/embeddings/weight"])
    assert [p.name for p in target.parent.iterdir()] == ["int8"]  # no half-built copy left behind


def test_a_model_already_in_int8_is_loaded_as_it_is(tmp_path: Path) -> None:
    write_model(tmp_path / MODEL_BIN, quantize_int8(_model()))
    assert int8_copy(tmp_path, tmp_path / "copy") == tmp_path


@pytest.mark.parametrize("cut", [3, 40, -5])
def test_a_damaged_model_file_is_refused(tmp_path: Path, cut: int) -> None:
    write_model(tmp_path / MODEL_BIN, _model())
    data = (tmp_path / MODEL_BIN).read_bytes()
    (tmp_path / MODEL_BIN).write_bytes(data[:cut] + (b"junk" if cut < 0 else b""))
    with pytest.raises(ModelUnavailable):
        read_model(tmp_path / MODEL_BIN)


def test_a_copy_made_meanwhile_by_another_process_is_used_and_a_stale_one_never(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import voxserve.backends.asr.int8_store as store

    source, target = tmp_path / "src", tmp_path / "cache" / "int8"
    source.mkdir()
    write_model(source / MODEL_BIN, _model())
    real_replace = os.replace

    def raced(src: str, dst: str) -> None:  # the other process renames its copy first
        real_replace(src, dst)
        raise OSError("Directory not empty")

    monkeypatch.setattr(store.os, "replace", raced)
    assert int8_copy(source, target) == target
    monkeypatch.undo()
    changed = _model()
    changed.variables["decoder/embeddings/weight"] = -changed.variables["decoder/embeddings/weight"]
    write_model(source / MODEL_BIN, changed)
    os.utime(source / MODEL_BIN, ns=(10**18, 10**18))

    def full(path: Path, model: ModelFile) -> None:  # the new copy cannot be written: the old one is stale
        raise OSError("No space left on device")

    monkeypatch.setattr(store, "write_model", full)
    with pytest.raises(OSError):
        int8_copy(source, target)



def test_a_current_copy_made_meanwhile_is_kept_not_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import voxserve.backends.asr.int8_store as store

    source, target = tmp_path / "src", tmp_path / "cache" / "int8"
    source.mkdir()
    write_model(source / MODEL_BIN, _model())
    real_write = store.write_model
    made: list[int] = []

    def slow_write(path: Path, model: ModelFile) -> None:  # another process finishes its copy meanwhile
        real_write(path, model)
        if not made:
            monkeypatch.setattr(store, "write_model", real_write)
            int8_copy(source, target)
            made.append((target / MODEL_BIN).stat().st_ino)

    monkeypatch.setattr(store, "write_model", slow_write)
    assert int8_copy(source, target) == target
    assert (target / MODEL_BIN).stat().st_ino == made[0]  # the other process's file, never removed
