// Speak tab: text -> audio as it is made. "All at once" posts to /v1/audio/speech (pcm, as SSE) and
// plays the deltas while they stream; "word by word" sends the text in pieces over /v1/audio/speech/stream,
// as an LLM would. Both show the time to first audio and light each word while it is heard (speech.audio.words
// events, with include: ["word_timestamps"]: times from the voice's own durations).

import { apiFetch, describe, describeClose, describeErrorEvent, openSocket, UserError } from "./api.js";
import { PcmPlayer, saveBlob, wavBlob } from "./audio.js";
import { $, LevelMeter, ms, showError } from "./ui.js";

export function setupSpeak(voices) {
  const ui = {
    text: $("speak-text"), voice: $("speak-voice"), speed: $("speak-speed"), speedValue: $("speak-speed-value"),
    go: $("speak-go"), stop: $("speak-stop"), save: $("speak-save"), state: $("speak-state"), error: $("speak-error"),
    stats: $("speak-stats"), ttfb: $("speak-ttfb"), serverTtfb: $("speak-server-ttfb"), received: $("speak-received"),
    voiceUsed: $("speak-voice-used"), words: $("speak-words"),
  };
  const meter = new LevelMeter($("speak-level"));
  let current = null;
  let last = null; // {chunks, rate} of the last synthesis, for Save WAV

  ui.speed.addEventListener("input", () => { ui.speedValue.textContent = `${Number(ui.speed.value).toFixed(2)}×`; });
  ui.go.addEventListener("click", () => speak());
  ui.stop.addEventListener("click", () => current?.stop());
  ui.save.addEventListener("click", () => last && saveBlob(wavBlob(last.chunks, last.rate), "speech.wav"));

  async function speak() {
    showError(ui.error, "");
    const text = ui.text.value.trim();
    if (!text) {
      showError(ui.error, "Type some text to speak first.");
      ui.text.focus();
      return;
    }
    const list = await voices();
    if (!list.ok) {
      showError(ui.error, list.message);
      return;
    }
    const voice = list.data.find((v) => v.id === ui.voice.value) || list.data[0];
    current?.stop();
    const mode = document.querySelector('input[name="speak-mode"]:checked').value;
    const run = new Synthesis({ text, voice, speed: Number(ui.speed.value), mode, ui, meter });
    current = run;
    ui.go.disabled = true;
    ui.stop.disabled = false;
    ui.save.disabled = true;
    try {
      await run.play();
      last = { chunks: run.chunks, rate: run.rate };
      ui.save.disabled = run.chunks.length === 0;
    } catch (err) {
      if (err.name !== "AbortError") showError(ui.error, describe(err));
      ui.state.textContent = "Stopped.";
    } finally {
      if (current === run) current = null;
      ui.go.disabled = false;
      ui.stop.disabled = true;
    }
  }
}

/** One synthesis: request, stream into the player, wait until it has played. */
class Synthesis {
  constructor({ text, voice, speed, mode, ui, meter }) {
    Object.assign(this, { text, voice, speed, mode, ui, meter });
    this.rate = voice.sample_rate;
    this.chunks = [];
    this.bytes = 0;
    this.started = 0;
    this.stopped = false;
    this.abort = new AbortController();
    this.player = new PcmPlayer(this.rate);
    this.words = []; // {start, end, el} of the words the socket timed
    this.lit = null;
  }

  /** Words arrived with their times: show them, to be lit while they play. */
  onWords(words) {
    for (const w of words) {
      const el = document.createElement("span");
      el.textContent = w.word;
      this.ui.words.append(el, " ");
      this.words.push({ start: w.start, end: w.end, el });
    }
  }

  /** Light the word being heard now. */
  highlight() {
    const now = this.player.playedMs / 1000;
    const word = this.words.find((w) => w.start <= now && now < w.end) || null;
    if (word === this.lit) return;
    this.lit?.el.classList.remove("spoken-now");
    word?.el.classList.add("spoken-now");
    this.lit = word;
  }

  async play() {
    const { ui } = this;
    const ready = this.player.start(); // the AudioContext starts inside the click
    for (const k of ["ttfb", "serverTtfb", "received"]) ui[k].textContent = "–";
    ui.voiceUsed.textContent = `${this.voice.id} (${this.rate} Hz)`;
    ui.words.replaceChildren();
    ui.stats.dataset.bytes = "0";
    ui.stats.dataset.peak = "0";
    ui.state.textContent = "Requesting speech…";
    try {
      await ready;
      this.animate();
      if (this.mode === "ws") await this.viaSocket();
      else await this.viaHttp();
      if (this.stopped) return;
      ui.state.textContent = "Playing…";
      await this.drained();
      ui.state.textContent = `Done: ${(this.bytes / 2 / this.rate).toFixed(1)} s of audio.`;
    } finally {
      this.stopped = true;
      await this.player.close();
      this.meter.set(0);
    }
  }

  /** A piece of PCM16 arrived. */
  onAudio(bytes) {
    if (this.stopped) return;
    if (this.bytes === 0) {
      this.ui.ttfb.textContent = ms(performance.now() - this.started);
      this.ui.state.textContent = "Playing…";
    }
    this.bytes += bytes.byteLength;
    this.chunks.push(bytes);
    this.player.pushPcm16(bytes);
    this.ui.stats.dataset.bytes = String(this.bytes);
    this.ui.received.textContent = `${(this.bytes / 2 / this.rate).toFixed(2)} s (${this.bytes.toLocaleString()} bytes)`;
  }

  async viaHttp() {
    this.started = performance.now();
    const response = await apiFetch("v1/audio/speech", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "tts-1", input: this.text, voice: this.voice.id, response_format: "pcm", sample_rate: this.rate,
                             speed: this.speed, stream_format: "sse", include: ["word_timestamps"] }),
      signal: this.abort.signal,
    });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let pending = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done || this.stopped) break;
      const events = (pending + value).split("\n\n");
      pending = events.pop();
      for (const event of events) {
        if (!event.startsWith("data: ")) continue;
        const ev = JSON.parse(event.slice(6));
        if (ev.type === "speech.audio.words") this.onWords(ev.words);
        else if (ev.type === "speech.audio.delta") this.onAudio(Uint8Array.from(atob(ev.audio), (c) => c.charCodeAt(0)));
      }
    }
  }

  viaSocket() {
    return new Promise((resolve, reject) => {
      const ws = openSocket("v1/audio/speech/stream");
      this.ws = ws;
      let finished = false;
      ws.onopen = () => {
        ws.send(JSON.stringify({ type: "session.update", voice: this.voice.id, speed: this.speed, binary: true,
                                 include: ["word_timestamps"] }));
      };
      ws.onmessage = (message) => {
        if (typeof message.data !== "string") {
          this.onAudio(new Uint8Array(message.data));
          return;
        }
        const ev = JSON.parse(message.data);
        if (ev.type === "session.updated") {
          if (ev.sample_rate !== this.rate) {
            reject(new UserError(`The voice speaks at ${ev.sample_rate} Hz, not the ${this.rate} Hz it listed.`));
            ws.close();
            return;
          }
          this.sendWords(ws);
        } else if (ev.type === "speech.audio.words") {
          this.onWords(ev.words);
        } else if (ev.type === "done") {
          finished = true;
          this.ui.serverTtfb.textContent = ms(ev.ttfb_ms);
          ws.close(1000);
          resolve();
        } else if (ev.type === "error") {
          finished = true;
          reject(new UserError(describeErrorEvent(ev)));
          ws.close();
        }
      };
      ws.onclose = (event) => {
        if (finished || this.stopped) {
          resolve();
          return;
        }
        reject(new UserError(describeClose(event) || "The server ended the stream before the audio was done."));
      };
    });
  }

  /** Send the text a word at a time (about 20 words a second), then text.done. */
  async sendWords(ws) {
    const words = this.text.split(/(?<=\s)/);
    this.started = performance.now();
    for (const word of words) {
      if (this.stopped || ws.readyState !== WebSocket.OPEN) return;
      ws.send(JSON.stringify({ type: "text.append", text: word }));
      await new Promise((r) => setTimeout(r, 50));
    }
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "text.done" }));
  }

  /** Resolves when everything received has played (or on stop). */
  drained() {
    return new Promise((resolve) => {
      const check = () => {
        if (this.stopped || this.bytes === 0 || (this.player.played > 0 && !this.player.busy)) resolve();
        else setTimeout(check, 50);
      };
      check();
    });
  }

  animate() {
    const tick = () => {
      if (this.stopped) return;
      const level = this.player.level();
      this.meter.set(level);
      this.ui.stats.dataset.peak = this.player.peak.toFixed(4);
      this.highlight();
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }

  stop() {
    if (this.stopped) return;
    this.stopped = true;
    this.abort.abort();
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify({ type: "cancel" }));
      this.ws.close(1000);
    }
    this.player.clear();
    this.ui.state.textContent = "Stopped.";
  }
}
