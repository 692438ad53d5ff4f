// AudioWorklet: plays mono float32 chunks pushed by the page, in order, without gaps between them.
// The AudioContext runs at the stream's own rate, so no resampling happens here (the browser converts
// to the output device's rate).
//
// Messages from the page: {type: "push", samples: Float32Array}, {type: "clear"} (drop everything queued,
// for barge-in or stop).
// Messages to the page: {type: "state", played, buffered} about every 50 ms while audio plays and once
// when the queue runs dry; {type: "cleared", played} after a clear. `played` counts samples since the
// node was made.

class PlaybackProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.queue = [];
    this.offset = 0; // read position in queue[0]
    this.buffered = 0;
    this.played = 0;
    this.sinceReport = 0;
    this.reportEvery = Math.round(sampleRate / 20);
    this.idle = true;
    this.port.onmessage = (event) => {
      const msg = event.data;
      if (msg.type === "push") {
        this.queue.push(msg.samples);
        this.buffered += msg.samples.length;
        this.idle = false;
      } else if (msg.type === "clear") {
        this.queue = [];
        this.offset = 0;
        this.buffered = 0;
        this.idle = true;
        this.port.postMessage({ type: "cleared", played: this.played });
      }
    };
  }

  process(inputs, outputs) {
    const channels = outputs[0];
    const out = channels[0];
    let i = 0;
    while (i < out.length && this.queue.length > 0) {
      const head = this.queue[0];
      const n = Math.min(out.length - i, head.length - this.offset);
      out.set(head.subarray(this.offset, this.offset + n), i);
      i += n;
      this.offset += n;
      this.played += n;
      this.buffered -= n;
      if (this.offset >= head.length) {
        this.queue.shift();
        this.offset = 0;
      }
    }
    if (i < out.length) out.fill(0, i);
    for (let c = 1; c < channels.length; c++) channels[c].set(out);
    if (!this.idle) {
      this.sinceReport += out.length;
      const dry = this.queue.length === 0;
      if (dry || this.sinceReport >= this.reportEvery) {
        this.sinceReport = 0;
        this.idle = dry;
        this.port.postMessage({ type: "state", played: this.played, buffered: this.buffered });
      }
    }
    return true;
  }
}

registerProcessor("voxserve-playback", PlaybackProcessor);
