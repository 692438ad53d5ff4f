// AudioWorklet: microphone samples (at the AudioContext's rate) -> mono 16-bit PCM at `targetRate`,
// posted to the page in chunks of `chunkMs`. The page low-pass filters the signal before this node
// (BiquadFilterNodes), so plain linear interpolation is enough to change the rate.
//
// Messages to the page: {type: "chunk", pcm: ArrayBuffer (Int16 little-endian), peak: 0..1}.
// Messages from the page: "flush" (send what is buffered now), "stop" (flush, then end).

class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const opts = (options && options.processorOptions) || {};
    this.targetRate = opts.targetRate || 16000;
    this.step = sampleRate / this.targetRate; // input samples per output sample
    this.pos = 0; // position of the next output sample, in input samples from this block's start (-1 = last block's end)
    this.last = 0; // last input sample of the previous block
    this.chunk = new Int16Array(Math.max(1, Math.round((this.targetRate * (opts.chunkMs || 100)) / 1000)));
    this.fill = 0;
    this.peak = 0;
    this.running = true;
    this.port.onmessage = (event) => {
      if (event.data === "flush" || event.data === "stop") this.flush();
      if (event.data === "stop") {
        this.running = false;
        this.port.postMessage({ type: "stopped" });
      }
    };
  }

  flush() {
    if (this.fill === 0) return;
    const pcm = this.chunk.slice(0, this.fill).buffer;
    this.port.postMessage({ type: "chunk", pcm, peak: this.peak }, [pcm]);
    this.fill = 0;
    this.peak = 0;
  }

  emit(value) {
    const s = value > 1 ? 1 : value < -1 ? -1 : value;
    const a = s < 0 ? -s : s;
    if (a > this.peak) this.peak = a;
    this.chunk[this.fill++] = s < 0 ? s * 0x8000 : s * 0x7fff;
    if (this.fill === this.chunk.length) this.flush();
  }

  process(inputs) {
    if (!this.running) return false;
    const input = inputs[0];
    if (!input || input.length === 0 || input[0].length === 0) return true;
    let x = input[0];
    if (input.length > 1) { // average the channels
      const mixed = new Float32Array(x.length);
      for (const channel of input) for (let i = 0; i < x.length; i++) mixed[i] += channel[i] / input.length;
      x = mixed;
    }
    const n = x.length;
    let p = this.pos;
    while (p < n - 1) {
      const i = Math.floor(p);
      const frac = p - i;
      const a = i < 0 ? this.last : x[i];
      const b = x[i + 1];
      this.emit(a + (b - a) * frac);
      p += this.step;
    }
    this.pos = p - n;
    this.last = x[n - 1];
    return true;
  }
}

registerProcessor("voxserve-capture", CaptureProcessor);
