// Live tab: microphone -> /v1/realtime?intent=transcription (OpenAI Realtime transcription protocol).
// Partial hypotheses (voxserve extension) show in grey and turn into the final text of each utterance.

import { describe, describeClose, describeErrorEvent, openSocket } from "./api.js";
import { MicCapture, bytesToBase64 } from "./audio.js";
import { $, el, LevelMeter, median, ms, showError, SpeakerColours } from "./ui.js";

const RATE = 16000;
const EVENT = "conversation.item.input_audio_transcription";

export function setupLive() {
  const toggle = $("live-toggle");
  const state = $("live-state");
  const error = $("live-error");
  const list = $("live-transcript");
  const summary = $("live-summary");
  const meter = new LevelMeter($("live-level"));
  const colours = new SpeakerColours();
  const latencies = [];
  let session = null;

  toggle.addEventListener("click", () => (session ? session.stop() : start()));
  $("live-clear").addEventListener("click", () => {
    list.replaceChildren();
    latencies.length = 0;
    summary.textContent = "";
  });

  function setRecording(on) {
    toggle.textContent = on ? "Stop recording" : "Start recording";
    toggle.dataset.active = String(on); // the label says what pressing does (not aria-pressed: the label changes)
    toggle.classList.toggle("recording", on);
  }

  async function start() {
    showError(error, "");
    toggle.disabled = true;
    state.textContent = "Starting the microphone…";
    const s = new LiveSession({
      language: $("live-language").value || null,
      speakers: $("live-speakers").checked,
      onState: (text) => { state.textContent = text; },
      onError: (text) => showError(error, text),
      onLevel: (peak) => meter.set(peak),
      onEvent: (ev) => render(ev),
      onEnd: () => {
        session = null;
        setRecording(false);
        toggle.disabled = false;
      },
    });
    session = s;
    try {
      await s.start();
      setRecording(true);
    } catch (err) {
      showError(error, describe(err));
      state.textContent = "Not recording.";
      await s.stop();
    } finally {
      toggle.disabled = false;
    }
  }

  function item(id) {
    let li = list.querySelector(`li[data-item="${CSS.escape(id)}"]`);
    if (!li) {
      li = el("li", { className: "utt pending", dataset: { item: id } },
        el("span", { className: "utt-speaker", hidden: true }),
        el("span", { className: "utt-text" }, "…"),
        el("span", { className: "utt-meta" }));
      list.append(li);
      li.scrollIntoView({ block: "nearest" });
    }
    return li;
  }

  function render(ev) {
    const id = ev.item_id;
    if (ev.type === "input_audio_buffer.speech_started") {
      item(id);
    } else if (ev.type === `${EVENT}.partial`) {
      const li = item(id);
      li.dataset.partials = "1";
      if (li.classList.contains("pending")) li.querySelector(".utt-text").textContent = ev.transcript || "…";
    } else if (ev.type === `${EVENT}.delta`) {
      const li = item(id);
      if (!li.dataset.partials && li.classList.contains("pending")) {
        li.dataset.deltas = (li.dataset.deltas || "") + ev.delta;
        li.querySelector(".utt-text").textContent = li.dataset.deltas;
      }
    } else if (ev.type === `${EVENT}.completed`) {
      complete(item(id), ev);
    } else if (ev.type === `${EVENT}.failed`) {
      const li = item(id);
      li.classList.remove("pending");
      li.classList.add("failed");
      li.querySelector(".utt-text").textContent = `(not transcribed: ${ev.error?.message || "error"})`;
    }
  }

  function complete(li, ev) {
    const text = (ev.transcript || "").trim();
    if (!text) { // noise, not speech
      li.remove();
      return;
    }
    li.classList.remove("pending");
    li.classList.add("final");
    li.querySelector(".utt-text").textContent = text;
    const extra = ev.voxserve || {};
    const speaker = li.querySelector(".utt-speaker");
    if (extra.speaker) {
      speaker.textContent = extra.speaker;
      speaker.style.setProperty("--speaker", colours.get(extra.speaker));
      speaker.hidden = false;
    }
    const parts = [];
    if (typeof extra.latency_ms === "number") {
      latencies.push(extra.latency_ms);
      parts.push(`final ${ms(extra.latency_ms)} after speech ended`);
      li.dataset.latencyMs = String(extra.latency_ms);
    }
    if (ev.usage?.seconds) parts.push(`${ev.usage.seconds.toFixed(1)} s of audio`);
    li.querySelector(".utt-meta").textContent = parts.join(" · ");
    const n = list.querySelectorAll("li.final").length;
    summary.textContent = latencies.length
      ? `${n} utterance${n === 1 ? "" : "s"} · latency median ${ms(median(latencies))}, worst ${ms(Math.max(...latencies))}`
      : `${n} utterance${n === 1 ? "" : "s"}`;
  }
}

/** One recording: the microphone and its Realtime socket. */
class LiveSession {
  constructor(opts) {
    this.opts = opts;
    this.ws = null;
    this.queue = []; // audio captured before the socket is open
    this.open = false;
    this.stopping = false;
    this.ended = false;
    this.pending = new Set(); // utterances started but not yet final
    this.mic = new MicCapture({
      rate: RATE,
      chunkMs: 100,
      onChunk: (pcm) => this.send(pcm),
      onLevel: (peak) => opts.onLevel(peak),
      autoGainControl: !opts.speakers, // speaker labels compare voices: keep the level the microphone gives
    });
  }

  async start() {
    await this.mic.start(); // first: the AudioContext must start inside the click
    this.opts.onState("Connecting to the server…");
    this.ws = openSocket("/v1/realtime?intent=transcription");
    this.ws.onopen = () => {
      this.ws.send(JSON.stringify({
        type: "session.update",
        session: {
          type: "transcription",
          audio: {
            input: {
              format: { type: "audio/pcm", rate: RATE },
              transcription: { model: "whisper-1", language: this.opts.language },
              turn_detection: { type: "server_vad", threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 },
            },
          },
          voxserve: { partial_events: true, speakers: this.opts.speakers },
        },
      }));
      this.open = true;
      for (const pcm of this.queue) this.send(pcm);
      this.queue = [];
    };
    this.ws.onmessage = (message) => this.onMessage(message);
    this.ws.onclose = (event) => this.onClose(event);
  }

  send(pcm) {
    if (!this.open) {
      this.queue.push(pcm);
      return;
    }
    if (this.ws.readyState !== WebSocket.OPEN) return;
    this.ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio: bytesToBase64(pcm) }));
  }

  onMessage(message) {
    let ev;
    try {
      ev = JSON.parse(message.data);
    } catch {
      return;
    }
    const { onState } = this.opts;
    switch (ev.type) {
      case "session.created":
        break;
      case "session.updated":
        if (!this.stopping) onState("Listening: speak now.");
        break;
      case "input_audio_buffer.speech_started":
        this.pending.add(ev.item_id);
        if (!this.stopping) onState("Hearing speech…");
        break;
      case "input_audio_buffer.speech_stopped":
        if (!this.stopping) onState("Transcribing…");
        break;
      case `${EVENT}.completed`:
      case `${EVENT}.failed`:
        this.pending.delete(ev.item_id);
        if (!this.stopping) onState("Listening: speak now.");
        break;
      case "error":
        this.opts.onError(describeErrorEvent(ev));
        break;
      default:
        break;
    }
    this.opts.onEvent(ev);
    if (this.stopping && this.pending.size === 0) this.close();
  }

  onClose(event) {
    this.open = false;
    if (!this.stopping) {
      const words = describeClose(event);
      if (words) this.opts.onError(words);
    }
    this.finish();
  }

  /** Stop the microphone, let the last utterance finish (up to 5 s), then close. */
  async stop() {
    if (this.stopping) return;
    this.stopping = true;
    this.opts.onState("Finishing the last words…");
    await this.mic.stop();
    if (this.ws && this.ws.readyState === WebSocket.OPEN && this.pending.size > 0) {
      this.ws.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
      setTimeout(() => this.close(), 5000);
    } else {
      this.close();
    }
  }

  close() {
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) this.ws.close(1000);
    this.finish();
  }

  finish() {
    if (this.ended) return;
    this.ended = true;
    this.mic.stop();
    this.opts.onState("Not recording.");
    this.opts.onEnd();
  }
}
