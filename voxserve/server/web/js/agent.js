// Agent tab: a conversation with the voice agent over /v1/realtime (the OpenAI Realtime conversation
// protocol): microphone audio in, reply audio (PCM16, 24 kHz) and its transcript out. Speaking over a reply
// interrupts it: the server cancels the response, and the page drops the audio it still holds and tells
// the server how much was heard (conversation.item.truncate).

import { describe, describeClose, describeErrorEvent, openSocket } from "./api.js";
import { base64ToBytes, bytesToBase64, MicCapture, PcmPlayer } from "./audio.js";
import { $, el, LevelMeter, ms, showError } from "./ui.js";

const IN_RATE = 16000;
const OUT_RATE = 24000;

export function setupAgent() {
  const ui = {
    toggle: $("agent-toggle"), interrupt: $("agent-interrupt"), state: $("agent-state"), error: $("agent-error"),
    log: $("agent-log"), form: $("agent-form"), text: $("agent-text"), instructions: $("agent-instructions"),
    voice: $("agent-voice"),
  };
  const meter = new LevelMeter($("agent-level"));
  let convo = null;

  ui.toggle.addEventListener("click", () => (convo?.mic.running ? end() : begin(true)));
  ui.interrupt.addEventListener("click", () => convo?.interrupt());
  ui.form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = ui.text.value.trim();
    if (!text) return;
    if (!convo) await begin(false);
    if (convo && (await convo.ready)) {
      convo.say(text);
      ui.text.value = "";
    }
  });
  for (const input of [ui.instructions, ui.voice]) input.addEventListener("change", () => convo?.configure());

  function setTalking(on) {
    ui.toggle.textContent = on ? "End conversation" : convo ? "Use the microphone" : "Start conversation";
    ui.toggle.dataset.active = String(on); // the label says what pressing does (not aria-pressed: the label changes)
    ui.toggle.classList.toggle("recording", on);
  }

  async function begin(withMic) {
    showError(ui.error, "");
    ui.toggle.disabled = true;
    if (convo) { // text-only so far: add the microphone to the same conversation
      try {
        await convo.startMic();
        setTalking(true);
      } catch (err) {
        showError(ui.error, describe(err));
      }
      ui.toggle.disabled = false;
      return;
    }
    const c = new Conversation({ ui, meter, onEnd: () => { if (convo === c) convo = null; setTalking(false); ui.interrupt.disabled = true; } });
    convo = c;
    try {
      await c.start(withMic);
      setTalking(withMic);
    } catch (err) {
      showError(ui.error, describe(err));
      c.close();
    } finally {
      ui.toggle.disabled = false;
    }
  }

  function end() {
    convo?.close();
  }
}

class Conversation {
  constructor({ ui, meter, onEnd }) {
    Object.assign(this, { ui, meter, onEnd });
    this.player = new PcmPlayer(OUT_RATE);
    this.mic = new MicCapture({
      rate: IN_RATE, chunkMs: 50, echoCancellation: true,
      onChunk: (pcm) => this.send({ type: "input_audio_buffer.append", audio: bytesToBase64(pcm) }),
      onLevel: (peak) => { if (!this.player.busy) this.meter.set(peak); },
    });
    this.ws = null;
    this.closed = false;
    this.items = new Map(); // item_id -> bubble
    this.audioStart = new Map(); // assistant item_id -> player sample count when its audio began
    this.speaking = null; // assistant item_id whose audio is queued or playing
    this.responding = false;
    this.sentAt = null; // when a typed message was sent (for its reply's time to first audio)
    this.firstAudioMs = new Map(); // assistant item_id -> ms from the typed message to its first audio
    this.ready = new Promise((resolve) => { this._ready = resolve; });
  }

  async start(withMic) {
    const playerReady = this.player.start(); // inside the click
    if (withMic) await this.startMic();
    await playerReady;
    this.player.onState = () => this.updateState();
    this.setState("Connecting to the agent…");
    this.ws = openSocket("v1/realtime");
    this.ws.onopen = () => this.configure();
    this.ws.onmessage = (m) => this.onMessage(m);
    this.ws.onclose = (e) => {
      if (!this.closed) {
        const words = describeClose(e);
        if (words) showError(this.ui.error, words);
      }
      this._ready(false);
      this.close();
    };
    this.animate();
  }

  async startMic() {
    await this.mic.start();
    this.updateState();
  }

  send(event) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(event));
  }

  /** session.update with the settings on the page. */
  configure() {
    const session = {
      type: "realtime",
      audio: {
        input: { format: { type: "audio/pcm", rate: IN_RATE } },
        output: { format: { type: "audio/pcm", rate: OUT_RATE } },
      },
    };
    const instructions = this.ui.instructions.value.trim();
    if (instructions) session.instructions = instructions;
    if (this.ui.voice.value) session.audio.output.voice = this.ui.voice.value;
    this.send({ type: "session.update", session });
  }

  /** A typed message; a reply in progress is cut short first (as speaking over it would). */
  say(text) {
    if (this.responding) {
      this.send({ type: "response.cancel" });
      this.responding = false;
    }
    this.stopPlayback();
    this.send({ type: "conversation.item.create", item: { type: "message", role: "user", content: [{ type: "input_text", text }] } });
    this.send({ type: "response.create" });
    this.sentAt = performance.now();
  }

  /** Stop the reply now: cancel it on the server, drop queued audio, record what was heard. */
  async interrupt() {
    if (this.responding) this.send({ type: "response.cancel" });
    await this.stopPlayback();
  }

  async stopPlayback() {
    const item = this.speaking;
    if (!item || !this.player.busy) return;
    const played = await this.player.clear();
    const start = this.audioStart.get(item) ?? played;
    const heardMs = Math.max(0, Math.floor(((played - start) / OUT_RATE) * 1000));
    this.send({ type: "conversation.item.truncate", item_id: item, content_index: 0, audio_end_ms: heardMs });
    const b = this.bubble(item, "assistant");
    b.classList.add("interrupted");
    const meta = b.querySelector(".meta");
    meta.textContent = [meta.textContent, `interrupted after ${(heardMs / 1000).toFixed(1)} s`].filter(Boolean).join(" · ");
    this.speaking = null;
    this.updateState();
  }

  onMessage(message) {
    let ev;
    try {
      ev = JSON.parse(message.data);
    } catch {
      return;
    }
    const t = ev.type;
    if (t === "session.created") {
      const s = ev.session || {};
      if (s.instructions && !this.ui.instructions.value) this.ui.instructions.placeholder = s.instructions;
    } else if (t === "session.updated") {
      this._ready(true);
      this.updateState();
    } else if (t === "input_audio_buffer.speech_started") {
      this.hearing = true;
      this.stopPlayback(); // barge-in
      this.updateState();
    } else if (t === "input_audio_buffer.speech_stopped") {
      this.hearing = false;
      this.setState("Thinking…");
    } else if (t === "conversation.item.input_audio_transcription.completed") {
      this.text(ev.item_id, "user", ev.transcript);
    } else if (t === "conversation.item.created" && ev.item?.role === "user") {
      const part = (ev.item.content || []).find((c) => c.type === "input_text");
      if (part) this.text(ev.item.id, "user", part.text);
    } else if (t === "response.created") {
      this.responding = true;
      this.ui.interrupt.disabled = false;
      this.setState("Thinking…");
    } else if (t === "response.output_item.added") {
      this.bubble(ev.item.id, "assistant");
    } else if (t === "response.output_audio_transcript.delta" || t === "response.audio_transcript.delta") {
      const b = this.bubble(ev.item_id, "assistant");
      const atEnd = this.nearEnd();
      b.querySelector(".text").textContent += ev.delta;
      this.follow(atEnd);
    } else if (t === "response.output_audio.delta" || t === "response.audio.delta") {
      this.onAudio(ev.item_id, ev.delta);
    } else if (t === "response.output_audio_transcript.done" || t === "response.audio_transcript.done") {
      if (ev.transcript) this.bubble(ev.item_id, "assistant").querySelector(".text").textContent = ev.transcript;
    } else if (t === "response.done") {
      this.onDone(ev.response || {});
    } else if (t === "error") {
      if (ev.error?.code === "response_cancel_not_active") return; // the reply ended as we cancelled it
      showError(this.ui.error, describeErrorEvent(ev));
    }
  }

  onAudio(itemId, b64) {
    if (!this.audioStart.has(itemId)) {
      this.audioStart.set(itemId, this.player.pushed);
      if (this.sentAt !== null) this.firstAudioMs.set(itemId, performance.now() - this.sentAt);
      this.sentAt = null;
    }
    this.speaking = itemId;
    this.player.pushPcm16(base64ToBytes(b64));
    this.updateState();
  }

  onDone(response) {
    this.responding = false;
    const item = (response.output || [])[0];
    if (item?.id) {
      const atEnd = this.nearEnd();
      const b = this.bubble(item.id, "assistant");
      const meta = b.querySelector(".meta");
      const latency = response.voxserve?.latency;
      if (response.status === "cancelled") {
        b.classList.add("interrupted");
        if (!meta.textContent.includes("interrupted")) meta.textContent = "interrupted";
      } else if (response.status === "failed") {
        meta.textContent = "failed";
        const message = response.status_details?.error?.message;
        if (message) showError(this.ui.error, `The agent could not answer: ${message}`);
      } else if (latency && typeof latency.total_ms === "number") {
        meta.textContent = `first audio ${ms(latency.total_ms)} after you stopped speaking`;
      } else if (this.firstAudioMs.has(item.id)) {
        meta.textContent = `first audio ${ms(this.firstAudioMs.get(item.id))} after you sent it`;
      }
      const text = b.querySelector(".text");
      if (!text.textContent) {
        text.textContent = response.status === "cancelled" ? "(interrupted before it spoke)" : "(no words)";
        text.classList.add("note");
      }
      b.classList.remove("pending");
      this.follow(atEnd);
    }
    this.ui.interrupt.disabled = !this.player.busy;
    this.updateState();
  }

  bubble(id, role) {
    let b = this.items.get(id);
    if (!b) {
      b = el("li", { className: `msg ${role} pending`, dataset: { item: id, role } },
        el("span", { className: "who" }, role === "user" ? "You" : "Agent"),
        el("span", { className: "text" }),
        el("span", { className: "meta" }));
      const atEnd = this.nearEnd();
      this.items.set(id, b);
      this.ui.log.append(b);
      if (atEnd) this.ui.log.scrollTop = this.ui.log.scrollHeight;
    }
    return b;
  }

  nearEnd() {
    const log = this.ui.log;
    return log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  }

  /** Keep the newest words in view, unless the user had scrolled up to read (`atEnd` false). */
  follow(atEnd) {
    if (atEnd) this.ui.log.scrollTop = this.ui.log.scrollHeight;
  }

  text(id, role, text) {
    const atEnd = this.nearEnd();
    const b = this.bubble(id, role);
    b.querySelector(".text").textContent = text;
    b.classList.remove("pending");
    this.follow(atEnd);
  }

  setState(text) {
    this.ui.state.textContent = text;
  }

  updateState() {
    if (this.closed) return;
    if (this.player.busy) {
      this.setState("Agent speaking… (speak or press Interrupt to cut in)");
      this.ui.interrupt.disabled = false;
    } else if (this.responding) {
      this.setState("Thinking…");
    } else if (this.hearing) {
      this.setState("Hearing you…");
    } else {
      this.setState(this.mic.running ? "Listening: speak to the agent." : "Connected: type a message, or start the microphone.");
      this.ui.interrupt.disabled = true;
    }
  }

  animate() {
    const tick = () => {
      if (this.closed) return;
      if (this.player.busy) this.meter.set(this.player.level());
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.mic.stop();
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) this.ws.close(1000);
    this.player.close();
    this.meter.set(0);
    this.ui.state.textContent = "Not connected.";
    this.onEnd();
  }
}
