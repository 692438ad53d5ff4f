"""A CTranslate2 Whisper model with random weights and the shape of a real one, built with ``ctranslate2.specs``
and numpy only (no transformers, no download), for measuring throughput where no real weights exist.

Its text is meaningless: only speed is measured with it, with the decode length fixed (see
:mod:`voxserve.bench.gpu.bench`), because a random decoder stops at a random point. The directory is a
complete voxserve/faster-whisper model: ``model.bin``, ``config.json``, ``preprocessor_config.json`` and a
``tokenizer.json`` whose special tokens sit where Whisper's do (the other 50,257 entries are placeholders).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Whisper large-v3 language tokens, in token order (<|en|> = 50259 ... <|yue|> = 50358).
LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la mi "
    "ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd "
    "gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue"
).split()
TEXT_TOKENS = 50257
"""Ordinary (byte-pair) tokens below ``<|endoftext|>``."""


@dataclass(frozen=True)
class WhisperShape:
    """The dimensions of a Whisper model."""

    encoder_layers: int
    decoder_layers: int
    d_model: int
    heads: int
    n_mels: int = 128
    vocab: int = 51866
    audio_positions: int = 1500
    text_positions: int = 448

    @property
    def languages(self) -> int:
        """Language tokens between ``<|startoftranscript|>`` and ``<|translate|>``."""
        return self.vocab - TEXT_TOKENS - 1509  # eot, sot, 6 task/control tokens, 1501 timestamps

    def parameters(self) -> int:
        """Number of weights (about 809 million for large-v3-turbo)."""
        d, ff = self.d_model, 4 * self.d_model
        enc_layer = 4 * d * d + 2 * d * ff + 9 * d + ff + 4 * d
        dec_layer = 8 * d * d + 2 * d * ff + 13 * d + ff + 6 * d
        convs = d * self.n_mels * 3 + d * d * 3 + 2 * d
        embeddings = self.vocab * d + (self.audio_positions + self.text_positions) * d
        return self.encoder_layers * enc_layer + self.decoder_layers * dec_layer + convs + embeddings + 4 * d


LARGE_V3_TURBO = WhisperShape(encoder_layers=32, decoder_layers=4, d_model=1280, heads=20)
"""openai/whisper-large-v3-turbo: 32 encoder layers, 4 decoder layers, d_model 1280, 20 heads, 128 mels."""
TINY_RANDOM = WhisperShape(encoder_layers=2, decoder_layers=2, d_model=64, heads=4)
"""A tiny model of the same vocabulary and mel count: the same code path in seconds (tests)."""


def build_random_whisper(out_dir: Path, shape: WhisperShape = LARGE_V3_TURBO, *, seed: int = 0,
                         quantization: str = "float16") -> Path:
    """Write a random-weight CTranslate2 Whisper model of ``shape`` into ``out_dir`` and return it."""
    from ctranslate2.specs import whisper_spec

    if shape.languages != len(LANGUAGES):
        raise ValueError(f"a vocabulary of {shape.vocab} holds {shape.languages} languages, not {len(LANGUAGES)}")
    spec = whisper_spec.WhisperSpec(shape.encoder_layers, shape.heads, shape.decoder_layers, shape.heads)
    fill = _Filler(np.random.default_rng(seed))
    _fill_encoder(spec.encoder, shape, fill)
    _fill_decoder(spec.decoder, shape, fill)
    tokens = _tokens(shape)
    spec.register_vocabulary(tokens)
    ids = {t: i for i, t in enumerate(tokens)}
    spec.config.suppress_ids = [220, ids["<|endoftext|>"] - 1]  # two placeholders: the field is only read
    spec.config.suppress_ids_begin = [220, ids["<|endoftext|>"]]
    spec.config.lang_ids = [ids[f"<|{lang}|>"] for lang in LANGUAGES]
    spec.config.alignment_heads = [(shape.decoder_layers - 1, h) for h in range(shape.heads)]
    spec.validate()
    spec.optimize(quantization=quantization)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec.save(str(out_dir))
    (out_dir / "tokenizer.json").write_text(json.dumps(_tokenizer(tokens)), encoding="utf-8")
    (out_dir / "preprocessor_config.json").write_text(
        json.dumps({"feature_size": shape.n_mels, "sampling_rate": 16000, "hop_length": 160, "n_fft": 400,
                    "chunk_length": 30}), encoding="utf-8")
    return out_dir


class _Filler:
    """Small random weights (uniform, std 0.02) so that activations stay finite in float16."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def weight(self, *shape: int) -> np.ndarray:
        a = 0.02 * np.sqrt(3.0)
        out: np.ndarray = (self.rng.random(shape, dtype=np.float32) * (2 * a) - a).astype(np.float32)
        return out

    def linear(self, spec: Any, out_dim: int, in_dim: int, bias: bool = True) -> None:
        spec.weight = self.weight(out_dim, in_dim)
        if bias:
            spec.bias = np.zeros(out_dim, np.float32)

    @staticmethod
    def norm(spec: Any, d: int) -> None:
        spec.gamma = np.ones(d, np.float32)
        spec.beta = np.zeros(d, np.float32)


def _fill_attention(spec: Any, d: int, fill: _Filler, cross: bool) -> None:
    fill.norm(spec.layer_norm, d)
    if cross:
        fill.linear(spec.linear[0], d, d)  # queries
        fill.linear(spec.linear[1], 2 * d, d)  # keys and values of the audio, fused
    else:
        fill.linear(spec.linear[0], 3 * d, d)  # queries, keys, values fused
    fill.linear(spec.linear[-1], d, d)


def _fill_ffn(spec: Any, d: int, fill: _Filler) -> None:
    fill.norm(spec.layer_norm, d)
    fill.linear(spec.linear_0, 4 * d, d)
    fill.linear(spec.linear_1, d, 4 * d)


def _fill_encoder(enc: Any, s: WhisperShape, fill: _Filler) -> None:
    d = s.d_model
    enc.conv1.weight, enc.conv1.bias = fill.weight(d, s.n_mels, 3), np.zeros(d, np.float32)
    enc.conv2.weight, enc.conv2.bias = fill.weight(d, d, 3), np.zeros(d, np.float32)
    enc.position_encodings.encodings = fill.weight(s.audio_positions, d)
    fill.norm(enc.layer_norm, d)
    for layer in enc.layer:
        _fill_attention(layer.self_attention, d, fill, cross=False)
        _fill_ffn(layer.ffn, d, fill)


def _fill_decoder(dec: Any, s: WhisperShape, fill: _Filler) -> None:
    d = s.d_model
    dec.embeddings.weight = fill.weight(s.vocab, d)
    dec.position_encodings.encodings = fill.weight(s.text_positions, d)
    fill.norm(dec.layer_norm, d)
    dec.projection.weight = dec.embeddings.weight  # tied, as in Whisper
    for layer in dec.layer:
        _fill_attention(layer.self_attention, d, fill, cross=False)
        _fill_attention(layer.attention, d, fill, cross=True)
        _fill_ffn(layer.ffn, d, fill)


def _tokens(s: WhisperShape) -> list[str]:
    """Whisper's token layout: text, <|endoftext|>, <|startoftranscript|>, languages, tasks, timestamps."""
    special = ["<|endoftext|>", "<|startoftranscript|>", *(f"<|{lang}|>" for lang in LANGUAGES),
               "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
               "<|notimestamps|>", *(f"<|{i * 0.02:.2f}|>" for i in range(1501))]
    # Real Whisper vocabularies hold one empty entry, as the last text token here: CTranslate2 4.8 tells a
    # multilingual model from an English-only one by its vocabulary, and without it sees an English one.
    tokens = [f"w{i}" for i in range(TEXT_TOKENS - 1)] + [""] + special
    if len(tokens) != s.vocab:
        raise ValueError(f"token layout has {len(tokens)} entries, the model {s.vocab}")
    return tokens


def _tokenizer(tokens: list[str]) -> dict[str, Any]:
    """A ``tokenizers`` word-level tokenizer: placeholders decode to words, specials are added tokens."""
    first_special = TEXT_TOKENS
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
             "special": True}
            for i, t in enumerate(tokens) if i >= first_special
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {t: i for i, t in enumerate(tokens)}, "unk_token": "w0"},
    }
