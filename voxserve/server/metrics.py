"""Prometheus metrics of one server (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from voxserve.types import Transcript

RTFX_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
LATENCY_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30, 60, 300)
AGENT_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1, 1.25, 1.5, 2, 3, 5)


class Metrics:
    """Counters and histograms exported on ``/metrics``; also the engine's batch observer."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("voxserve_requests", "HTTP requests by endpoint and status", ["endpoint", "status"], registry=r)
        self.request_seconds = Histogram(
            "voxserve_request_seconds", "Request latency by endpoint", ["endpoint"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.audio_seconds = Counter("voxserve_audio_seconds", "Audio seconds processed", ["model", "kind"], registry=r)
        self.rtfx = Histogram("voxserve_rtfx", "Audio seconds per wall second of a request", ["kind"], buckets=RTFX_BUCKETS, registry=r)
        self.queue_depth = Gauge("voxserve_queue_depth", "Items waiting in a model's batcher", ["model"], registry=r)
        self.batch_size = Histogram(
            "voxserve_batch_size", "Items per model batch", ["model"], buckets=(1, 2, 4, 8, 16, 32, 64), registry=r
        )
        self.batch_seconds = Histogram("voxserve_batch_seconds", "Model batch run time", ["model"], buckets=LATENCY_BUCKETS, registry=r)
        self.retries = Counter("voxserve_guard_retries", "Chunks re-decoded by the hallucination guard", registry=r)
        self.rechunks = Counter("voxserve_guard_rechunks", "Chunks cut in two by the hallucination guard", registry=r)
        self.guard_failures = Counter("voxserve_guard_failures", "Chunks that failed every guard attempt", registry=r)
        self.errors = Counter("voxserve_errors", "Errors by type", ["type"], registry=r)
        self.inflight = Gauge("voxserve_inflight_requests", "Transcriptions in progress", registry=r)
        self.jobs = Gauge("voxserve_jobs", "Jobs by status (as last seen)", ["status"], registry=r)
        self.webhook_attempts = Counter(
            "voxserve_webhook_attempts", "Job callback attempts by outcome: delivered, retried (failed, tried "
            "again later), failed (refused or given up)", ["outcome"], registry=r,
        )
        self.live_streams = Gauge("voxserve_live_streams", "Active live transcription sessions", registry=r)
        self.live_final_latency = Histogram(
            "voxserve_live_final_latency_seconds", "End of speech (or commit) to final text",
            buckets=(0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5), registry=r,
        )
        self.live_partials = Counter("voxserve_live_partials", "Partial hypotheses sent", registry=r)
        self.live_dropped_events = Counter("voxserve_live_dropped_events", "Partial events dropped for slow readers", registry=r)
        self.live_behind = Gauge("voxserve_live_behind_seconds", "Most audio any live stream has not yet processed", registry=r)
        self.tts_streams = Gauge("voxserve_tts_streams", "Active speech synthesis streams", registry=r)
        self.tts_ttfb = Histogram("voxserve_tts_ttfb_seconds", "Synthesis stream start to first audio",
                                  buckets=(0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2), registry=r)
        self.tts_first_sentence = Histogram("voxserve_tts_first_sentence_seconds", "Stream start to its first whole sentence",
                                            buckets=(0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5), registry=r)
        self.tts_rtf = Histogram("voxserve_tts_stream_rtf", "Synthesis seconds per audio second of a stream",
                                 buckets=(0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2), registry=r)
        self.tts_streams_ended = Counter("voxserve_tts_streams_ended", "Synthesis streams by how they ended", ["status"], registry=r)
        self.replica_events = Counter(
            "voxserve_replica_events", "Ray replica events: started, lost, recovered, retried (requests re-sent)",
            ["model", "event"], registry=r,
        )
        self.replicas = Gauge("voxserve_replicas_in_service", "Ray replicas in service", ["model"], registry=r)
        self.agent_reply_latency = Histogram(
            "voxserve_agent_reply_latency_seconds",
            "Voice agent: end of user speech to first reply audio (part=total) and its parts (end_of_turn, asr, "
            "llm_ttft, tts_ttfb, retrieval)", ["part"], buckets=AGENT_BUCKETS, registry=r,
        )
        self.agent_responses = Counter("voxserve_agent_responses", "Agent responses by status", ["status"], registry=r)
        self.agent_interruptions = Counter("voxserve_agent_interruptions", "Replies the user interrupted", registry=r)
        self.agent_sessions = Gauge("voxserve_agent_sessions", "Active voice agent conversations", registry=r)

    def on_batch(self, name: str, size: int, wait_s: float, run_s: float, queue_depth: int) -> None:
        """BatchObserver: one model batch ran."""
        self.batch_size.labels(name).observe(size)
        self.batch_seconds.labels(name).observe(run_s)
        self.queue_depth.labels(name).set(queue_depth)

    # TtsObserver
    def on_stream_start(self, stream_id: int, voice: str, active_streams: int) -> None:
        """A synthesis stream was admitted."""
        self.tts_streams.set(active_streams)

    def on_first_audio(self, stream_id: int, ttfb_s: float) -> None:
        """A synthesis stream produced its first audio."""
        self.tts_ttfb.observe(ttfb_s)

    def on_first_sentence(self, stream_id: int, seconds: float) -> None:
        """A synthesis stream finished its first sentence."""
        self.tts_first_sentence.observe(seconds)

    def on_stream_end(self, stats: Any, status: str, active_streams: int) -> None:
        """A synthesis stream ended (done, cancelled or failed)."""
        self.tts_streams.set(active_streams)
        self.tts_streams_ended.labels(status).inc()
        if stats.rtf is not None:
            self.tts_rtf.observe(stats.rtf)

    def on_transcript(self, t: Transcript, model: str, kind: str) -> None:
        """A transcription finished."""
        self.audio_seconds.labels(model, kind).inc(t.duration_s)
        if t.stats.wall_s > 0:
            self.rtfx.labels(kind).observe(t.rtfx)
        self.retries.inc(t.stats.retries)
        self.rechunks.inc(t.stats.rechunks)
        self.guard_failures.inc(t.stats.guard_failures)

    def on_replica_event(self, model: str, replica: str, event: str) -> None:
        """ReplicaObserver (``voxserve.distributed``): a Ray replica started, was lost or recovered, or a
        request was re-sent to another replica."""
        self.replica_events.labels(model, event).inc()
        if event in ("started", "recovered"):
            self.replicas.labels(model).inc()
        elif event == "lost":
            self.replicas.labels(model).dec()

    def on_reply_latency(self, latency: Any) -> None:
        """AgentObserver: a voice turn's reply started to play (``voxserve.agent.events.ReplyLatency``)."""
        for part in ("total", "end_of_turn", "asr", "llm_ttft", "tts_ttfb", "retrieval"):
            self.agent_reply_latency.labels(part).observe(getattr(latency, f"{part}_s"))

    def on_response_done(self, status: str) -> None:
        """AgentObserver: a response ended."""
        self.agent_responses.labels(status).inc()

    def on_interruption(self) -> None:
        """AgentObserver: the user cut a reply short."""
        self.agent_interruptions.inc()

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
