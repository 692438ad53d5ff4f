"""Process configuration: one frozen, validated settings object, nested per component.

Values come from (highest first) explicit arguments, environment variables (``VOXSERVE_`` prefix, ``__``
between levels, e.g. ``VOXSERVE_ASR__MAX_BATCH_SIZE=16``), a TOML or JSON file (``--config FILE``), and the
defaults below.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from voxserve.errors import InvalidInput


def _default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AsrConfig(_Frozen):
    """Speech recognition engine settings."""

    model: str = Field("whisper-base", description="Default model: a registered name or a directory path.")
    device: str = Field("cpu", description="cpu, cuda or auto.")
    compute_type: str = Field("default", description="CTranslate2 compute type; default = int8 on CPU.")
    workers: int = Field(default_factory=_default_workers, ge=1, description="Concurrent model batches.")
    threads_per_worker: int = Field(1, ge=1, description="Threads inside one model batch.")
    max_batch_size: int = Field(8, ge=1, le=256, description="Chunks per decoder batch.")
    max_wait_ms: float = Field(10.0, ge=0, description="How long a batch with live or agent work waits to fill.")
    offline_wait_ms: float = Field(
        10.0, ge=0, description="How long a batch of offline work waits to fill. A long file sends its chunks in "
        "groups, so a longer wait only holds back its first chunks and its last retries (100 ms measured slower "
        "on the tune half, the same text; docs/benchmarks.md).")
    max_queue: int = Field(4096, ge=1, description="Queued chunks beyond which new work is refused.")
    beam_size: int = Field(1, ge=1, le=16, description="Beam width at temperature 0 (1 = greedy).")
    best_of: int = Field(3, ge=1, le=16, description="Samples per retry at temperature above 0.")
    keyterms: tuple[str, ...] = Field(
        (), description="Words and names every transcription favours (files and live streams), ahead of each "
        "request's own keyterms, e.g. [\"Voxserve\", \"CTranslate2\"].")


class GuardSettings(_Frozen):
    """Hallucination guard thresholds (see ``voxserve.pipelines.guard``)."""

    enabled: bool = True
    max_compression_ratio: float = 2.4
    min_avg_logprob: float = -1.0
    no_speech_threshold: float = 0.6
    max_words_per_minute: float = 380.0
    min_words_per_minute: float = Field(30.0, ge=0.0, description="Fewer words per minute of 8 s or more of speech fail.")
    loop_words_per_s: float = Field(4.5, gt=0.0, description="A repeated run fails above this many words per second of speech.")
    loop_min_avg_logprob: float = Field(-0.7, description="A repeated run fails below this mean token log-probability.")
    retry_beam_size: int = Field(5, ge=1, le=16, description="Beam width of the deterministic retry.")
    loop_repetition_penalty: float = Field(1.3, ge=1.0, le=3.0, description="Repetition penalty of the last deterministic retry (1 = none).")
    temperatures: tuple[float, ...] = Field(
        (), description="Sampled retries after the deterministic ones, e.g. [0.2, 0.6, 1.0] (Whisper's fallback); "
        "CTranslate2 has no per-call seed, so sampled text is not reproducible from run to run.")
    rechunk: bool = True


class ChunkSettings(_Frozen):
    """Long-file chunking."""

    max_chunk_s: float = Field(
        14.0, gt=1.0, le=30.0, description="Most packed speech in one chunk; 14 s chunks are encoded in 15 s windows, "
        "which cost half of what a 30 s window costs per second of audio (attention grows with the square).")
    fit_below_s: float = Field(
        20.0, ge=0.0, le=30.0, description="Chunks shorter than this use a fitted encoder window (0 = always 30 s)."
    )
    vad_threshold: float = Field(
        0.3, gt=0.0, lt=1.0, description="Offline favours recall: Whisper and the guard reject non-speech."
    )
    min_silence_ms: int = Field(300, ge=0)
    speech_pad_ms: int = Field(200, ge=0)
    vad_fresh_after_s: float = Field(
        1.0, ge=0.0, description="Every this much quiet in a row, a second VAD state starts afresh and each frame is "
        "scored by the likelier of the two (0 = one state, about a quarter less VAD work). One state drifts in long "
        "files: quiet speech after loud speech was scored 0.05-0.2 instead of 0.6-1.0 and lost.")


class ServerConfig(_Frozen):
    """HTTP/WebSocket server settings."""

    host: str = Field("127.0.0.1", description="Bind address; binding a public one without api_keys logs a warning.")
    port: int = Field(8000, ge=0, le=65535)
    api_keys: tuple[str, ...] = Field((), description="Accepted bearer tokens; empty = no authentication.")
    model_aliases: dict[str, str] = Field(
        default_factory=dict,
        description="Requested model name -> local recogniser (e.g. gpt-4o-mini-transcribe = whisper-tiny.en); "
        "OpenAI's transcription names not listed here map to asr.model.",
    )
    max_upload_mb: float = Field(200.0, gt=0, description="Largest accepted request body.")
    max_audio_s: float = Field(4 * 3600.0, gt=0, description="Longest accepted audio.")
    max_sync_audio_s: float = Field(3600.0, gt=0, description="Longest audio for a synchronous request; use jobs beyond.")
    max_concurrent_per_key: int = Field(8, ge=1, description="Concurrent requests per API key (or client address).")
    max_inflight: int = Field(64, ge=1, description="Transcriptions in progress before new ones get 503.")
    data_dir: str = Field("", description="Folder for the job database and uploads (default: ~/.local/share/voxserve).")
    job_workers: int = Field(2, ge=1, description="Jobs transcribed at the same time.")
    cors_origins: tuple[str, ...] = Field((), description="Origins allowed by CORS; empty = CORS off.")
    warmup: bool = Field(True, description="Run the default model once at start so the first request is fast.")
    ws_idle_timeout_s: float = Field(
        300.0, ge=0, description="WebSocket sessions with no message either way for this long close with 1001 (0 = never)."
    )
    ws_send_timeout_s: float = Field(
        30.0, ge=0, description="A WebSocket client that accepts no message for this long (it stopped reading) is "
        "closed with 1008, freeing its streams (0 = never).",
    )
    webhook_secret: str = Field(
        "", description="Key of the HMAC-SHA256 signature on job callbacks; empty = callbacks are sent unsigned "
        "(a warning at start).",
    )
    webhook_allow_hosts: tuple[str, ...] = Field(
        (), description="Callback hosts allowed although they resolve to private, loopback or other non-public "
        "addresses: host names, IP addresses or networks (10.0.0.0/8).",
    )
    webhook_timeout_s: float = Field(10.0, gt=0, description="One callback attempt, connection to response.")
    webhook_max_attempts: int = Field(8, ge=1, le=100, description="Callback attempts before giving up.")
    webhook_backoff_s: float = Field(2.0, ge=0, description="Wait after the first failed attempt; doubled each time.")
    webhook_max_backoff_s: float = Field(600.0, ge=0, description="Longest wait between two attempts.")
    webhook_max_result_kb: float = Field(
        256.0, ge=0, description="Callbacks carry the result up to this size; larger ones only link to it.",
    )
    webhook_ca_file: str = Field(
        "", description="PEM file of the CAs that https callback receivers' certificates are checked against "
        "(a private CA); empty = the public CAs (certifi).",
    )


class TtsConfig(_Frozen):
    """Speech synthesis settings (see ``voxserve.streaming.tts``)."""

    voice: str = Field("joe", description="Default voice: a registered name or a Piper .onnx path.")
    voices_dir: str = Field("", description="Folder of extra Piper voices (*.onnx with .onnx.json).")
    device: str = Field("cpu", description="cpu or cuda for Piper voices.")
    max_streams: int = Field(16, ge=1, description="Concurrent synthesis streams; beyond them new ones get Overloaded.")
    acoustic_workers: int = Field(2, ge=1, description="Threads running acoustic models (stage 1, per stream).")
    decoder_max_batch_size: int = Field(
        0, ge=0, le=256,
        description="Windows per decoder batch; 0 = 1 on CPU (stacked batches measured slower per item there) "
        "and 32 on GPU.",
    )
    decoder_max_wait_ms: float = Field(15.0, ge=0, description="How long a decoder batch waits to fill.")
    decoder_workers: int = Field(0, ge=0, description="Threads calling the decoder; 0 = one per core on CPU, 1 on GPU.")
    urgent_workers: int = Field(
        2, ge=0, le=8,
        description="One more thread each for the acoustic model and the decoder that runs only work due within "
        "urgent_horizon_s (a new stream's first audio, a stream about to run dry); 0 = none.")
    urgent_horizon_s: float = Field(0.5, ge=0, le=10, description="How soon work must be due for the urgent threads.")
    background_nice: int = Field(
        10, ge=0, le=19,
        description="On Linux the other synthesis threads run this much nicer, so an urgent thread takes a core "
        "from them at once rather than waiting for their model call to end (0 = off).")
    first_window_frames: int = Field(0, ge=0, description="Frames of a stream's first window; 0 = the decoder's default.")
    window_frames: int = Field(0, ge=0, description="Frames of later windows; 0 = the decoder's default.")
    context_frames: int = Field(-1, ge=-1, description="Context frames on each side; -1 = the decoder's default.")
    max_input_chars: int = Field(100_000, ge=1, description="Longest text one request or stream accepts.")
    noise_scale: float | None = Field(
        None, ge=0, le=2, description="Piper voices' latent sampling noise; unset = each voice's own (0.667 for "
        "most); 0 with noise_w 0 makes every rendering of a text the same.")
    noise_w: float | None = Field(
        None, ge=0, le=2, description="Piper voices' duration noise; unset = each voice's own (0.8 for most); 0 "
        "gives every rendering of a text the same timing.")
    lexicon_file: str = Field(
        "", description="Server-wide pronunciation lexicon (JSON object or word<TAB>respelling lines; see "
        "voxserve.text.lexicon), loaded once; a request's pronunciations override its entries.")
    urgent_buffer_s: float = Field(1.0, ge=0, description="Below this much audio ahead, a sentence starts with a small window.")
    max_ahead_s: float = Field(6.0, ge=0, description="A live stream pauses this far ahead of playback (0 = never).")
    openai_voice_aliases: bool = Field(True, description="Accept OpenAI voice names (alloy, nova, ...) for the default voice.")
    http_sample_rate: int = Field(
        24000, ge=0, le=48000,
        description="Sample rate of /v1/audio/speech output in every format (OpenAI's pcm is 24 kHz); a request's "
        "'sample_rate' overrides it; 0 = the voice's own rate (22.05 kHz for Piper voices).")
    orpheus_model: str = Field("", description="Local Orpheus-style LLM directory (enables LLM-TTS voices).")
    orpheus_snac: str = Field("", description="Local SNAC 24 kHz directory for the Orpheus voices.")
    orpheus_voices: tuple[str, ...] = Field(("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe"))
    orpheus_device: str = Field("auto", description="cpu, cuda or auto for the Orpheus voices.")


class LiveConfig(_Frozen):
    """Live transcription (Realtime WebSocket) settings."""

    max_streams: int = Field(64, ge=1, description="Concurrent live sessions; beyond, new ones are closed with 1013.")
    partial_interval_ms: int = Field(600, ge=0, description="New audio between partial hypotheses (0 = none).")
    min_speech_ms: int = Field(100, ge=0, description="Shorter sounds do not start an utterance.")
    fit_step_s: float = Field(5.0, ge=1.0, le=30.0, description="Encoder windows are the utterance + 1 s, rounded up to this.")
    # Tuned on the tune half (bench live --streams 1,8 --seconds 60 --half tune, twice): 100 ms gave one stream
    # final p95 0.15 / 0.13 s against 0.20 / 0.17 s at 200 ms, 8 streams p50 0.01 s against 0.03-0.10 s, the same WER.
    speculate_ms: int = Field(
        100, ge=0, le=10_000,
        description="A pause this long starts the final decode early; the end of speech then finds it done (0 = off).")
    # Tuned on the tune half (bench live --seconds 90 --half tune, 17 utterances, twice): 4 s pieces 13.1 % WER
    # at one stream, 0 (no pieces), 6 and 10 s 21.5 %; at 4 and 8 streams 12.5-13.9 % for all.
    piece_s: float = Field(
        4.0, ge=0, le=60,
        description="At such a pause after this many seconds of speech, the speech so far is decoded as a piece of "
                    "the final and kept: a long utterance's final then decodes only its last piece (0 = off).")
    follow_on_s: float = Field(
        5.0, ge=-1, le=30,
        description="An utterance is heard after the speech it continues (its text as the decoder's prefix) when "
                    "that window is at most this much longer than its own (-1 = never).")
    # Tuned on the tune half (8 programs x 120 s, one stream at 2x real time, in-process; files 4.46 %): with
    # this design a gap of 2 s gave live WER 4.99 %, 4 s 4.55 %, 8 s 4.46 %, 16 s 4.46 % (the code before: 5.28 %).
    follow_on_gap_s: float = Field(
        8.0, ge=0, le=60,
        description="The previous utterance is the speech a new one continues when it ended at most this long before.")
    max_message_mb: float = Field(4.0, gt=0, description="Largest WebSocket message (larger ones close with 1009).")
    speaker_similarity: float = Field(
        0.7, ge=-1.0, le=1.0, description="Live speaker labels: cosine similarity to join a known speaker."
    )


class DiarizationConfig(_Frozen):
    """Speaker diarization (the ``[diarize]`` extra)."""

    embedder: str = Field("resemblyzer", description="Speaker embedder: resemblyzer (GE2E) or campplus (CAM++).")
    workers: int = Field(default_factory=_default_workers, ge=1, description="Concurrent batches per diarization model.")
    threads_per_worker: int = Field(1, ge=1, description="ONNX Runtime threads inside one batch.")
    max_batch_size: int = Field(8, ge=1, le=256, description="Windows or speech pieces per model call.")
    max_wait_ms: float = Field(10.0, ge=0, description="How long a batch waits to fill.")
    step_s: float = Field(2.5, gt=0.0, le=10.0, description="Segmentation windows (10 s) start this often.")
    threshold: float | None = Field(None, gt=0.0, lt=2.0, description="Clustering cut; None = the embedder's measured default.")
    naming_embedder: str = Field("campplus", description="Embedder of known speakers (enrolled voices) and of the "
                                 "diarizations that name them: CAM++ tells AMI voices apart, GE2E does not.")
    naming_threshold: float | None = Field(None, gt=-1.0, lt=1.0, description="Cosine similarity a speaker needs "
                                           "with an enrolled voice to take its name; None = the embedder's measured one.")


class RayConfig(_Frozen):
    """Scale-out on Ray (the ``[ray]`` extra, see ``voxserve.distributed``): speech recognition runs on model
    replicas (Ray actors, each with its own batcher); the server, VAD and chunk planning stay in this process."""

    enabled: bool = Field(False, description="Run speech recognition on Ray replicas (`voxserve serve --ray`).")
    address: str = Field(
        "", description='"" = start a private Ray instance on this machine (loopback only); "auto" = join the '
        'cluster started here with `ray start`; "HOST:PORT" or "ray://HOST:10001" = join that cluster.',
    )
    replicas: int = Field(2, ge=1, description="Replicas of each model.")
    cpus_per_replica: float = Field(1.0, ge=0, description="Ray CPUs each replica reserves.")
    gpus_per_replica: float = Field(
        0.0, ge=0, description="GPUs each replica reserves; a fraction (0.5, 0.25) packs several replicas on one GPU "
        "(MIG-like slices that share its memory). Needs asr.device cuda or auto.",
    )
    resources: dict[str, float] = Field(
        default_factory=dict, description='Custom Ray resources each replica reserves, e.g. {"mig_1g": 1}.'
    )
    workers_per_replica: int = Field(1, ge=1, description="Concurrent model batches inside one replica.")
    threads_per_worker: int = Field(1, ge=1, description="Threads inside one batch of a replica.")
    max_inflight_per_replica: int = Field(
        0, ge=0, description="Offline chunks in flight per replica; more wait at the head (0 = two full batches)."
    )
    max_attempts: int = Field(3, ge=1, description="Replicas one chunk may be sent to when replicas fail.")
    max_restarts: int = Field(3, ge=-1, description="Times Ray restarts a crashed replica (-1 = always).")
    start_timeout_s: float = Field(300.0, gt=0, description="How long replicas may take to be placed and loaded.")
    num_cpus: int | None = Field(None, ge=1, description="CPUs of a private Ray instance (default: all cores).")
    namespace: str = Field("voxserve", description="Ray namespace of the replicas.")


class AgentConfig(_Frozen):
    """The voice agent (the ``[agent]`` extra, see ``voxserve.agent``): LLM, retrieval and turn taking."""

    llm_url: str = Field("", description="OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama); "
                         "empty = the embedded SmolLM2-135M-Instruct on llama.cpp.")
    llm_model: str = Field("", description="Model name sent to llm_url; or a GGUF file for the embedded runtime.")
    llm_api_key: str = Field("", description="Bearer token for llm_url.")
    llm_timeout_s: float = Field(30.0, gt=0, description="Read timeout of llm_url.")
    llm_threads: int = Field(1, ge=1, description="Threads of the embedded LLM (1 on small shared CPUs).")
    llm_context_tokens: int = Field(2048, ge=256, description="Context window of the embedded LLM.")
    instructions: str = Field("You are a helpful voice assistant.", description="Default system prompt.")
    max_output_tokens: int = Field(80, ge=1, le=4096, description="Longest reply, in tokens.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="LLM sampling temperature (0 = greedy).")
    history_tokens: int = Field(768, ge=0, description="Tokens of earlier turns kept in the prompt.")
    knowledge_dir: str = Field("", description="Folder of .md/.txt files the agent answers from (retrieval).")
    top_k: int = Field(2, ge=0, le=16, description="Knowledge passages per turn.")
    min_score: float = Field(0.3, ge=-1.0, le=1.0, description="Least cosine similarity of a passage in the prompt.")
    embed_conversation: bool = Field(
        False, description="Load the text embedder without a knowledge folder, to recall old turns of long talks."
    )
    asr_model: str = Field("", description="Recogniser of the agent's turns (default: asr.model).")
    voice: str = Field("", description="Default voice of replies (default: tts.voice).")
    language: str = Field("en", description="Language of the user's speech ('' = detect per utterance).")
    silence_ms: int = Field(500, ge=50, le=10_000, description="Silence that ends a turn whose words look finished.")
    incomplete_silence_ms: int = Field(
        1500, ge=0, le=10_000, description="Silence that ends a turn whose words stop mid-sentence."
    )
    cut_silence_ms: int = Field(150, ge=50, le=2000, description="Pause after which an utterance is transcribed.")
    speculative: bool = Field(True, description="Draft the reply during the end-of-turn silence (released at its end).")
    audio_events: str = Field("ga", pattern="^(ga|beta)$",
                              description="Reply audio events: ga = response.output_audio.delta, beta = response.audio.delta.")
    max_sessions: int = Field(8, ge=1, description="Concurrent conversation sessions; beyond, new ones close with 1013.")


class Settings(BaseSettings):
    """All voxserve settings."""

    model_config = SettingsConfigDict(env_prefix="VOXSERVE_", env_nested_delimiter="__", frozen=True, extra="forbid")

    asr: AsrConfig = Field(default_factory=AsrConfig)
    guard: GuardSettings = Field(default_factory=GuardSettings)
    chunking: ChunkSettings = Field(default_factory=ChunkSettings)
    tts: TtsConfig = Field(default_factory=TtsConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    live: LiveConfig = Field(default_factory=LiveConfig)
    diarization: DiarizationConfig = Field(default_factory=DiarizationConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)


def load_settings(path: str | Path | None = None, **overrides: dict[str, Any]) -> Settings:
    """Build settings: explicit ``overrides`` (per section) > environment > the TOML/JSON file > defaults."""
    file_data = _read_file(Path(path)) if path is not None else {}
    init = {section: {k: v for k, v in values.items() if v is not None} for section, values in overrides.items()}

    class _Layered(Settings):
        @classmethod
        def settings_customise_sources(
            cls, settings_cls: Any, init_settings: Any, env_settings: Any, dotenv_settings: Any, file_secret_settings: Any
        ) -> Any:
            return (init_settings, env_settings, lambda: file_data)

    try:
        layered = _Layered(**{k: v for k, v in init.items() if v})  # type: ignore[arg-type]
    except ValueError as exc:
        raise InvalidInput(f"invalid configuration: {exc}") from exc
    return Settings.model_construct(**{name: getattr(layered, name) for name in Settings.model_fields})


def _read_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InvalidInput(f"config file {path} does not exist")
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(f"config file {path} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInput(f"config file {path} must hold a table of settings")
    return data
