"""Whisper on CTranslate2: batched recognition with word timestamps and variable encoder windows.

Any CTranslate2 Whisper directory works (``model.bin``, ``config.json``, ``tokenizer.json``, optionally
``preprocessor_config.json``), which includes every faster-whisper model directory.

How a batch runs (CPU-tuned, measured on a 2-core EPYC): the encoder is run one window at a time (batching
the encoder on CPU costs more per item), the decoder runs the whole batch at once (3x cheaper per item at
batch 8), and alignment for word timestamps runs batched on the stored encoder output. On a GPU the encoder
runs batched as well (``encode_batch_size``).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from voxserve.backends.asr.options import check_decode_options
from voxserve.backends.asr.whisper_words import words_from_alignment
from voxserve.backends.base import WINDOW_S, AsrLoadOptions, AsrModelInfo, AsrRequest, AsrResult, DecodeOptions
from voxserve.backends.checks import check_audio, check_batch_audio
from voxserve.errors import BackendError, ModelUnavailable
from voxserve.types import SAMPLE_RATE, Float32Array

HOP = 160
"""Samples per mel frame (10 ms)."""
MAX_TEXT_TOKENS = 448
_LANG_TOKEN = re.compile(r"^<\|([a-z]{2,3})\|>$")


class CTranslate2Whisper:
    """A Whisper model on CTranslate2 implementing :class:`voxserve.backends.base.AsrModel`."""

    def __init__(self, path: str | Path, name: str = "whisper", options: AsrLoadOptions | None = None) -> None:
        """Load the CTranslate2 Whisper directory ``path``, served as ``name``, placed as ``options`` say
        (default: one worker of one thread on the CPU)."""
        options = options or AsrLoadOptions()
        import ctranslate2
        import tokenizers

        directory = Path(path)
        for required in ("model.bin", "config.json", "tokenizer.json"):
            if not (directory / required).is_file():
                raise ModelUnavailable(f"{directory} is not a CTranslate2 Whisper directory: {required} is missing")
        device = options.device
        if device == "auto":
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        compute_type = options.compute_type
        if compute_type == "default":
            compute_type = "int8" if device == "cpu" else "float16"
        weights = directory
        if compute_type == "int8":
            from voxserve.backends.asr.embedded import int8_dir

            weights = int8_dir(directory)  # an embedded model's int8 copy: no quantizing at every start
        try:
            self._model = ctranslate2.models.Whisper(
                str(weights),
                device=device,
                device_index=options.device_index,
                compute_type=compute_type,
                inter_threads=max(1, options.workers),
                intra_threads=max(1, options.threads_per_worker),
            )
        except (RuntimeError, ValueError) as exc:
            raise ModelUnavailable(f"cannot load Whisper model from {directory}: {exc}") from exc
        self._ct2 = ctranslate2
        self.directory = directory
        self.device = device
        self.compute_type = compute_type
        self._encode_batch = options.encode_batch_size or (1 if device == "cpu" else 64)
        self._tokenizer = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._n_mels = self._read_n_mels(directory)
        self._features = _feature_extractor(self._n_mels)
        self._special = self._special_tokens()
        languages = tuple(sorted(self._language_tokens()))
        self._info = AsrModelInfo(
            name=name,
            multilingual=bool(self._model.is_multilingual),
            window_samples=WINDOW_S * SAMPLE_RATE,
            max_text_tokens=MAX_TEXT_TOKENS,
            languages=languages if self._model.is_multilingual else ("en",),
        )

    # ----------------------------------------------------------------------------------------- setup

    @staticmethod
    def _read_n_mels(directory: Path) -> int:
        pre = directory / "preprocessor_config.json"
        if pre.is_file():
            return int(json.loads(pre.read_text()).get("feature_size", 80))
        return 80

    def _token(self, text: str) -> int:
        token_id = self._tokenizer.token_to_id(text)
        if token_id is None:
            raise ModelUnavailable(f"tokenizer has no {text} token: not a Whisper tokenizer")
        return int(token_id)

    def _special_tokens(self) -> dict[str, int]:
        names = ("startoftranscript", "endoftext", "startofprev", "notimestamps", "transcribe", "translate")
        return {name: self._token(f"<|{name}|>") for name in names}

    def _language_tokens(self) -> dict[str, int]:
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        found = {}
        for text, token_id in vocab.items():
            match = _LANG_TOKEN.match(text)
            if match:
                found[match.group(1)] = token_id
        return found

    # ------------------------------------------------------------------------------------ public API

    @property
    def info(self) -> AsrModelInfo:
        """Static facts about the model."""
        return self._info

    def check_options(self, options: DecodeOptions) -> None:
        """Raise when these options cannot run on this model."""
        check_decode_options(self._info, options)

    def detect_language(self, audio: Float32Array) -> list[tuple[str, float]]:
        """Language probabilities of the audio's first 30 s, best first.

        Raises:
            InvalidInput: the audio is empty, not 1-D float samples, or has NaN or infinite samples.
        """
        check_audio(audio)
        if not self._info.multilingual:
            return [("en", 1.0)]
        encoded = self._encode([self._mel(audio, "full")])
        return self._detect(encoded)[0]

    def encode_only(self, audio: Float32Array, options: DecodeOptions | None = None) -> None:
        """Run only the encoder on the window ``options`` (default: a full one) give ``audio`` (the
        benchmark's lower bound)."""
        o = options or DecodeOptions()
        self._encode([self._mel(audio, o.window, o.fit_step_s)])

    def transcribe_batch(self, requests: Sequence[AsrRequest]) -> list[AsrResult]:
        """Recognise every request; requests with compatible options share decoder calls. Only the first 30 s
        of a longer request are heard (as in :meth:`detect_language`).

        Raises:
            InvalidInput: a request's audio is empty (Whisper would hear "you" in it), not 1-D float samples,
                or has NaN or infinite samples (it would come back as an empty text of log-probability -inf);
                checked before any model call.
        """
        check_batch_audio([r.audio for r in requests], "request audio")
        results: list[AsrResult | None] = [None] * len(requests)
        # Tokenized once: grouping and prompts use them.
        previous = [self._previous(r.options) for r in requests]
        prefixes = [self._prefix(r.options) for r in requests]
        for indices in self._group(requests, previous, prefixes).values():
            group = [requests[i] for i in indices]
            try:
                outputs = self._run_group(group, [previous[i] for i in indices], [prefixes[i] for i in indices])
            except RuntimeError as exc:
                raise BackendError(f"CTranslate2 failed: {exc}", retryable=True) from exc
            for i, result in zip(indices, outputs):
                results[i] = result
        return [r for r in results if r is not None]

    # ------------------------------------------------------------------------------------- internals

    def batch_key(self, request: AsrRequest) -> Hashable:
        """What requests must share to be decoded in one call: the encoder window, the sampling, and the
        lengths of the previous text and of the prefix."""
        return self._key(request, self._previous(request.options), self._prefix(request.options))

    @staticmethod
    def _key(request: AsrRequest, previous: list[int], prefix: list[int]) -> tuple[Any, ...]:
        o = request.options
        frames = _window_frames(len(request.audio), o.window, o.fit_step_s)
        # Not keyed by max_new_tokens: long-file chunks all have different caps, and a group per cap made
        # every decoder call a batch of one (measured: 26% slower on the corpus long file, one CPU worker).
        # Keyed by the previous-text length: CTranslate2 needs <|startoftranscript|> at the same position
        # in every sequence of a generate call (live streams each carry their own previous text).
        # And by the prefix's length: every prompt of a call has the same length.
        return (frames, o.temperature, o.beam_size if o.temperature == 0 else o.best_of, o.repetition_penalty,
                len(previous), len(prefix))

    @classmethod
    def _group(cls, requests: Sequence[AsrRequest], previous: list[list[int]], prefixes: list[list[int]]
               ) -> dict[tuple[Any, ...], list[int]]:
        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for i, req in enumerate(requests):
            groups[cls._key(req, previous[i], prefixes[i])].append(i)
        return groups

    def _mel(self, audio: Float32Array, window: str, step_s: float = 5.0) -> np.ndarray:
        frames = _window_frames(len(audio), window, step_s)
        padded = np.zeros(frames * HOP, dtype=np.float32)
        usable = audio[: frames * HOP]
        padded[: len(usable)] = usable
        mel = self._features(padded, padding=0)
        return np.ascontiguousarray(mel[:, :frames], dtype=np.float32)

    def _encode(self, mels: list[np.ndarray]) -> Any:
        batch = np.stack(mels)
        if len(mels) <= self._encode_batch:
            return self._model.encode(self._ct2.StorageView.from_array(batch), to_cpu=False)
        parts = []
        for start in range(0, len(mels), self._encode_batch):
            view = self._ct2.StorageView.from_array(np.ascontiguousarray(batch[start : start + self._encode_batch]))
            parts.append(np.asarray(self._model.encode(view, to_cpu=True)))
        return self._ct2.StorageView.from_array(np.ascontiguousarray(np.concatenate(parts)))

    def _detect(self, encoded: Any) -> list[list[tuple[str, float]]]:
        out = []
        for ranking in self._model.detect_language(encoded):
            out.append([(token.strip("<|>"), float(p)) for token, p in ranking])
        return out

    def _run_group(self, group: list[AsrRequest], previous: list[list[int]], prefixes: list[list[int]]
                   ) -> list[AsrResult]:
        mels = [self._mel(r.audio, r.options.window, r.options.fit_step_s) for r in group]
        encoded = self._encode(mels)
        languages = self._languages(group, encoded, mels)
        prompts = [prev + self._start(r.options, lang) + prefix
                   for r, prev, prefix, (lang, _) in zip(group, previous, prefixes, languages)]
        caps = [r.options.max_new_tokens for r in group]
        cap = None if None in caps else max(c for c in caps if c is not None)  # a batch shares one length limit
        generated = self._generate(encoded, prompts, replace(group[0].options, max_new_tokens=cap))
        # CTranslate2 returns a prefix with the tokens that follow it.
        generated = [(tokens[len(p):] if tokens[: len(p)] == p else tokens, lp, ns)
                     for (tokens, lp, ns), p in zip(generated, prefixes)]
        # Each item keeps at most its own cap, so its text does not depend on which chunks shared its batch.
        generated = [(tokens[:c] if c else tokens, lp, ns) for (tokens, lp, ns), c in zip(generated, caps)]
        texts_tokens = [tokens for tokens, _, _ in generated]
        words = self._align(encoded, mels, group, languages, texts_tokens, prefixes)
        results = []
        for req, (lang, lang_p), (tokens, avg_logprob, no_speech), timed in zip(
            group, languages, generated, words
        ):
            results.append(
                AsrResult(
                    text=self._tokenizer.decode(list(tokens)).strip(),
                    tokens=tuple(tokens),
                    words=timed,
                    language=lang,
                    language_probability=lang_p,
                    avg_logprob=avg_logprob,
                    no_speech_prob=no_speech,
                    temperature=req.options.temperature,
                )
            )
        return results

    def _languages(self, group: list[AsrRequest], encoded: Any, mels: list[np.ndarray]) -> list[tuple[str, float]]:
        """Each request's language: the one it gives, else the one detected (only requests without one are
        detected on CPU, where picking their encoder output is a copy; on a GPU the whole batch is)."""
        if not self._info.multilingual:
            return [("en", 1.0)] * len(group)
        unknown = [i for i, r in enumerate(group) if not r.options.language]
        if not unknown:
            return [(str(r.options.language), 1.0) for r in group]
        if self.device == "cpu" and len(unknown) < len(group):
            detected = dict(zip(unknown, self._detect(self._select(encoded, mels, unknown))))
        else:
            detected = dict(enumerate(self._detect(encoded)))
        return [(str(r.options.language), 1.0) if r.options.language
                else _best_allowed(detected[i], r.options.allowed_languages) for i, r in enumerate(group)]

    def _sot(self, task: str, language: str) -> list[int]:
        seq = [self._special["startoftranscript"]]
        if self._info.multilingual:
            seq += [self._token(f"<|{language}|>"), self._special[task]]
        return seq

    def _previous(self, options: DecodeOptions) -> list[int]:
        """``<|startofprev|>`` and the prompt's last tokens, or nothing without a prompt."""
        if not (options.prompt and options.prompt.strip()):
            return []
        ids = self._tokenizer.encode(" " + options.prompt.strip(), add_special_tokens=False).ids
        return [self._special["startofprev"]] + ids[-(MAX_TEXT_TOKENS // 2 - 1) :]

    def _prefix(self, options: DecodeOptions) -> list[int]:
        """The prefix's tokens (the decoder continues after them), or nothing without one."""
        if not (options.prefix and options.prefix.strip()):
            return []
        return self._tokenizer.encode(" " + options.prefix.strip(), add_special_tokens=False).ids[-(MAX_TEXT_TOKENS // 4):]

    def _start(self, options: DecodeOptions, language: str) -> list[int]:
        """The start sequence after the previous text: start of transcript, language, task, no timestamps."""
        return self._sot(options.task, language) + [self._special["notimestamps"]]

    def _generate(self, encoded: Any, prompts: list[list[int]], o: DecodeOptions) -> list[tuple[list[int], float, float]]:
        longest = max(len(p) for p in prompts)
        new_tokens = o.max_new_tokens or MAX_TEXT_TOKENS
        kwargs: dict[str, Any] = {
            # CTranslate2 4.8 stops Whisper near max_length / 2 new tokens when the prompt is short (measured:
            # 60 -> 30 with the 4-token start sequence) and near max_length - prompt when it is long, so the
            # cap is doubled to give about ``new_tokens`` either way.
            "max_length": min(MAX_TEXT_TOKENS, longest + 2 * new_tokens),
            "return_scores": True,
            "return_no_speech_prob": True,
            "suppress_blank": True,
            "repetition_penalty": o.repetition_penalty,
        }
        if o.temperature > 0:
            kwargs.update(beam_size=1, num_hypotheses=o.best_of, sampling_topk=0, sampling_temperature=o.temperature)
        else:
            kwargs.update(beam_size=o.beam_size)
        eot = self._special["endoftext"]
        out = []
        for res in self._model.generate(encoded, prompts, **kwargs):
            best, best_sum = [], -math.inf
            for ids, score in zip(res.sequences_ids, res.scores):
                tokens = [t for t in ids if t < eot]
                total = float(score) * max(1, len(tokens))
                if total > best_sum:
                    best, best_sum = tokens, total
            out.append((best, best_sum / (len(best) + 1), float(res.no_speech_prob)))
        return out

    def _align(
        self,
        encoded: Any,
        mels: list[np.ndarray],
        group: list[AsrRequest],
        languages: list[tuple[str, float]],
        texts: list[list[int]],
        prefixes: list[list[int]],
    ) -> list[tuple[Any, ...]]:
        """Word timings. On CPU each item is aligned alone: measured 0.065 s per item alone vs 0.12 s per
        item in a batch of 8 (the batch pads every text to the longest). A prefix is aligned with the text
        (it is what the audio begins with) and its words are left out."""
        out: list[tuple[Any, ...]] = [()] * len(group)
        by_sot: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for i, req in enumerate(group):
            if req.options.word_timestamps and texts[i]:
                by_sot[tuple(self._sot(req.options.task, languages[i][0]))].append(i)
        for sot, indices in by_sot.items():
            parts = [[i] for i in indices] if self.device == "cpu" else [indices]
            for part in parts:
                sub = encoded if len(part) == len(group) else self._select(encoded, mels, part)
                frames = [min(mels[i].shape[1], math.ceil(len(group[i].audio) / HOP)) for i in part]
                aligned = self._model.align(sub, list(sot), [prefixes[i] + texts[i] for i in part], frames)
                for i, res in zip(part, aligned):
                    words = words_from_alignment(
                        self._tokenizer, prefixes[i] + texts[i], res.alignments, res.text_token_probs,
                        self._special["endoftext"], len(group[i].audio), languages[i][0],
                    )
                    out[i] = _after_prefix(words, len(prefixes[i]))
        return out

    def _select(self, encoded: Any, mels: list[np.ndarray], indices: list[int]) -> Any:
        """The encoder output of some items of a batch (re-encoded when it lives on a GPU)."""
        if self.device != "cpu":
            return self._encode([mels[i] for i in indices])
        return self._ct2.StorageView.from_array(np.ascontiguousarray(np.asarray(encoded)[indices]))


def _after_prefix(words: tuple[Any, ...], prefix_tokens: int) -> tuple[Any, ...]:
    """The words after the first ``prefix_tokens`` tokens (a prefix ends at a word: the text after it starts
    with a space)."""
    if not prefix_tokens:
        return words
    seen, kept = 0, []
    for word in words:
        if seen >= prefix_tokens:
            kept.append(word)
        seen += len(word.tokens)
    return tuple(kept)


def _best_allowed(ranking: list[tuple[str, float]], allowed: tuple[str, ...]) -> tuple[str, float]:
    """The most likely language of a detection ranking (best first) that is ``allowed`` (empty = any), with
    its probability renormalised over the allowed ones."""
    if not allowed:
        return ranking[0]
    kept = [(code, p) for code, p in ranking if code in allowed]
    if not kept:
        return allowed[0], 0.0
    total = sum(p for _, p in kept)
    return kept[0][0], kept[0][1] / total if total > 0 else 0.0


def _window_frames(n_samples: int, window: str, step_s: float) -> int:
    """Encoder frames for a request (:meth:`DecodeOptions.window_s`; equal windows batch)."""
    seconds = DecodeOptions(window=window, fit_step_s=step_s).window_s(n_samples)
    return int(seconds * SAMPLE_RATE) // HOP


def _feature_extractor(n_mels: int) -> Any:
    return _LogMel(n_mels)


class _LogMel:
    """Whisper's log-Mel spectrogram as faster-whisper computes it, except that the filter-bank projection is
    summed in one fixed order (``einsum``, not BLAS). BLAS splits that product differently with its thread
    count, so the same audio gave slightly different features, and sometimes different text, in processes
    with different ``OMP_NUM_THREADS`` (Ray sets 1 in its workers) or on machines with other core counts.
    It costs about 3 ms more per 30 s window on one core."""

    def __init__(self, n_mels: int) -> None:
        from faster_whisper.feature_extractor import FeatureExtractor

        self._fe = FeatureExtractor(feature_size=n_mels)
        self._window = np.hanning(self._fe.n_fft + 1)[:-1].astype(np.float32)

    def __call__(self, audio: np.ndarray, padding: int = 0) -> np.ndarray:
        fe = self._fe
        waveform = np.pad(audio.astype(np.float32, copy=False), (0, padding)) if padding else audio
        stft = fe.stft(waveform, fe.n_fft, fe.hop_length, window=self._window, return_complex=True)
        magnitudes = np.abs(stft.astype(np.complex64)[..., :-1]) ** 2
        mel = np.einsum("mf,ft->mt", fe.mel_filters, magnitudes, optimize=False)
        log_spec = np.log10(np.clip(mel, 1e-10, None))
        log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
        return np.asarray((log_spec + 4.0) / 4.0, dtype=np.float32)
