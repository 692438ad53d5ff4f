// Microphone capture and PCM playback on AudioWorklets, plus small PCM helpers.

import { UserError } from "./api.js";

const CAPTURE_URL = new URL("../worklets/capture-processor.js", import.meta.url);
const PLAYBACK_URL = new URL("../worklets/playback-processor.js", import.meta.url);

function requireAudioApis(needMic) {
  if (!window.isSecureContext) {
    throw new UserError("The microphone and audio worklets need a secure page: open it over https, " +
      "or at http://localhost / http://127.0.0.1 on the server's own machine.");
  }
  if (typeof AudioWorkletNode === "undefined") {
    throw new UserError("This browser has no AudioWorklet support; use a current Chrome, Edge or Firefox.");
  }
  if (needMic && !navigator.mediaDevices?.getUserMedia) {
    throw new UserError("This browser does not give pages access to a microphone.");
  }
}

/** Wait for `resumed` (the context's resume(), called inside the click) for up to 3 s; a context that does not
 * start (no sound device, sound blocked for the page) is an error in words rather than a silent hang. */
async function started(ctx, resumed, what) {
  const timeout = new Promise((resolve) => setTimeout(resolve, 3000));
  await Promise.race([resumed, timeout]);
  if (ctx.state !== "running") {
    throw new UserError(`The browser did not start ${what} (its audio stayed “${ctx.state}”). Check that a sound ` +
      "device is connected and that this site may play sound, then press the button again.");
  }
}

/** The microphone as 16-bit mono PCM at `rate`, delivered to `onChunk(ArrayBuffer)` every `chunkMs`. */
export class MicCapture {
  constructor({ rate = 16000, chunkMs = 100, onChunk, onLevel = () => {}, echoCancellation = false, autoGainControl = true } = {}) {
    this.rate = rate;
    this.chunkMs = chunkMs;
    this.onChunk = onChunk;
    this.onLevel = onLevel;
    this.echoCancellation = echoCancellation;
    this.autoGainControl = autoGainControl;
    this.ctx = null;
    this.stream = null;
    this.node = null;
  }

  /** Ask for the microphone and start sending chunks (call from a click: browsers need a gesture). */
  async start() {
    requireAudioApis(true);
    this.ctx = new AudioContext({ latencyHint: "interactive" });
    try {
      const resumed = this.ctx.resume(); // inside the gesture, before any await
      this.stream = await navigator.mediaDevices.getUserMedia({
        audio: {
          channelCount: 1,
          echoCancellation: this.echoCancellation,
          noiseSuppression: this.echoCancellation,
          autoGainControl: this.autoGainControl,
        },
      });
      await this.ctx.audioWorklet.addModule(CAPTURE_URL);
      await started(this.ctx, resumed, "audio capture");
      let head = this.ctx.createMediaStreamSource(this.stream);
      if (this.ctx.sampleRate > this.rate) { // anti-aliasing before the worklet drops the rate
        for (let i = 0; i < 2; i++) {
          const lowpass = new BiquadFilterNode(this.ctx, { type: "lowpass", frequency: this.rate * 0.45, Q: 0.7071 });
          head.connect(lowpass);
          head = lowpass;
        }
      }
      this.node = new AudioWorkletNode(this.ctx, "voxserve-capture", {
        numberOfInputs: 1,
        numberOfOutputs: 1,
        outputChannelCount: [1],
        processorOptions: { targetRate: this.rate, chunkMs: this.chunkMs },
      });
      this.node.port.onmessage = (event) => {
        const msg = event.data;
        if (msg.type === "chunk") {
          this.onLevel(msg.peak);
          this.onChunk(msg.pcm);
        } else if (msg.type === "stopped" && this._stopped) {
          this._stopped();
        }
      };
      head.connect(this.node);
      // Keep the graph pulled (some browsers skip nodes that reach no destination); the output is silent.
      const mute = new GainNode(this.ctx, { gain: 0 });
      this.node.connect(mute).connect(this.ctx.destination);
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  get running() {
    return this.node !== null;
  }

  /** Send what is buffered, release the microphone. */
  async stop() {
    if (this.node) {
      const done = new Promise((resolve) => { this._stopped = resolve; });
      this.node.port.postMessage("stop");
      await Promise.race([done, new Promise((r) => setTimeout(r, 300))]);
      this.node.disconnect();
      this.node = null;
    }
    if (this.stream) {
      for (const track of this.stream.getTracks()) track.stop();
      this.stream = null;
    }
    if (this.ctx) {
      await this.ctx.close().catch(() => {});
      this.ctx = null;
    }
    this.onLevel(0);
  }
}

/** Plays 16-bit PCM chunks at `rate` as they arrive; reports how much has played (for barge-in) and a level. */
export class PcmPlayer {
  constructor(rate) {
    this.rate = rate;
    this.ctx = null;
    this.node = null;
    this.analyser = null;
    this.played = 0; // samples the worklet has played
    this.pushed = 0; // samples handed to the worklet (minus those dropped by clear)
    this.peak = 0; // highest output level seen (AnalyserNode), 0..1
    this.onState = () => {};
    this._carry = null; // an odd byte left over from the last chunk
    this._pendingClear = null;
  }

  /** Make the AudioContext and the worklet (call from a click). */
  async start() {
    requireAudioApis(false);
    this.ctx = new AudioContext({ sampleRate: this.rate, latencyHint: "interactive" });
    const resumed = this.ctx.resume();
    await this.ctx.audioWorklet.addModule(PLAYBACK_URL);
    await started(this.ctx, resumed, "audio playback");
    this.node = new AudioWorkletNode(this.ctx, "voxserve-playback", {
      numberOfInputs: 0, numberOfOutputs: 1, outputChannelCount: [1],
    });
    this.analyser = new AnalyserNode(this.ctx, { fftSize: 2048 });
    this.node.connect(this.analyser).connect(this.ctx.destination);
    this.node.port.onmessage = (event) => {
      const msg = event.data;
      this.played = msg.played;
      if (msg.type === "cleared") {
        this.pushed = msg.played;
        if (this._pendingClear) this._pendingClear(msg.played);
        this._pendingClear = null;
      }
      this.onState(this);
    };
    return this;
  }

  get playedMs() {
    return (this.played / this.rate) * 1000;
  }

  /** Whether audio is queued or playing. */
  get busy() {
    return this.pushed > this.played;
  }

  /** Milliseconds of audio queued but not yet played. */
  get aheadMs() {
    return (Math.max(0, this.pushed - this.played) / this.rate) * 1000;
  }

  /** Queue PCM16 little-endian bytes (an ArrayBuffer or a view; any length: an odd byte waits for the next). */
  pushPcm16(data) {
    let bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (this._carry !== null) {
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = this._carry;
      joined.set(bytes, 1);
      bytes = joined;
      this._carry = null;
    }
    if (bytes.length % 2) {
      this._carry = bytes[bytes.length - 1];
      bytes = bytes.subarray(0, bytes.length - 1);
    }
    if (bytes.length === 0 || !this.node) return;
    const samples = pcm16ToFloat32(bytes);
    this.pushed += samples.length;
    this.node.port.postMessage({ type: "push", samples }, [samples.buffer]);
  }

  /** Drop queued audio now; resolves with the samples played so far. */
  clear() {
    this._carry = null;
    this.pushed = this.played;
    if (!this.node) return Promise.resolve(this.played);
    const done = new Promise((resolve) => { this._pendingClear = resolve; });
    this.node.port.postMessage({ type: "clear" });
    return Promise.race([done, new Promise((r) => setTimeout(() => r(this.played), 200))]);
  }

  /** The output's current peak level, 0..1 (also raises `peak`). */
  level() {
    if (!this.analyser) return 0;
    const data = new Float32Array(this.analyser.fftSize);
    this.analyser.getFloatTimeDomainData(data);
    let peak = 0;
    for (const v of data) peak = Math.max(peak, Math.abs(v));
    this.peak = Math.max(this.peak, peak);
    return peak;
  }

  async close() {
    if (this.ctx) await this.ctx.close().catch(() => {});
    this.ctx = null;
    this.node = null;
    this.analyser = null;
  }
}

/** Int16 little-endian bytes -> Float32Array in [-1, 1). */
export function pcm16ToFloat32(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.byteLength >> 1);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(i * 2, true) / 32768;
  return out;
}

/** Base64 text -> Uint8Array. */
export function base64ToBytes(text) {
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

/** ArrayBuffer -> base64 text. */
export function bytesToBase64(buffer) {
  const bytes = new Uint8Array(buffer);
  let raw = "";
  for (let i = 0; i < bytes.length; i += 0x8000) raw += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(raw);
}

/** A WAV file (Blob) from PCM16 chunks (Uint8Arrays) at `rate`. */
export function wavBlob(chunks, rate) {
  const size = chunks.reduce((n, c) => n + c.byteLength, 0);
  const header = new DataView(new ArrayBuffer(44));
  const text = (offset, s) => { for (let i = 0; i < s.length; i++) header.setUint8(offset + i, s.charCodeAt(i)); };
  text(0, "RIFF");
  header.setUint32(4, 36 + size, true);
  text(8, "WAVE");
  text(12, "fmt ");
  header.setUint32(16, 16, true);
  header.setUint16(20, 1, true); // PCM
  header.setUint16(22, 1, true); // mono
  header.setUint32(24, rate, true);
  header.setUint32(28, rate * 2, true);
  header.setUint16(32, 2, true);
  header.setUint16(34, 16, true);
  text(36, "data");
  header.setUint32(40, size, true);
  return new Blob([header, ...chunks], { type: "audio/wav" });
}

/** Save a Blob as a file through a temporary link. */
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
