// File tab: upload -> /v1/jobs (with speakers) -> poll progress -> verbose_json; the transcript in speaker
// colours, a speaker timeline drawn over the file's waveform (decoded here with WebAudio), click to play.

import { apiFetch, apiJson, authHeaders, describe, errorFrom, UserError } from "./api.js";
import { saveBlob } from "./audio.js";
import { $, clock, el, showError, SpeakerColours } from "./ui.js";

const WAVE_BUCKETS = 4000;
const MAX_DECODE_BYTES = 150e6; // larger files: timeline without the waveform (decoding holds it all in memory)
const SERVER_FORMATS = { txt: "text", srt: "srt", vtt: "vtt", json: "verbose_json" };

export function setupFile() {
  const ui = {
    drop: $("file-drop"), input: $("file-input"), name: $("file-name"), start: $("file-start"),
    cancel: $("file-cancel"), progress: $("file-progress"), upload: $("file-upload-progress"),
    uploadText: $("file-upload-text"), job: $("file-job-progress"), jobText: $("file-job-text"),
    error: $("file-error"), result: $("file-result"), stats: $("file-stats"), canvas: $("file-wave"),
    legend: $("file-legend"), audio: $("file-audio"), transcript: $("file-transcript"),
  };
  const state = { file: null, run: 0, xhr: null, jobId: null, result: null, wave: null, audioUrl: null, words: [] };
  let colours = new SpeakerColours();

  ui.input.addEventListener("change", () => ui.input.files[0] && choose(ui.input.files[0]));
  for (const type of ["dragenter", "dragover"]) {
    ui.drop.addEventListener(type, (e) => { e.preventDefault(); ui.drop.classList.add("dragging"); });
  }
  for (const type of ["dragleave", "drop"]) {
    ui.drop.addEventListener(type, () => ui.drop.classList.remove("dragging"));
  }
  ui.drop.addEventListener("drop", (e) => {
    e.preventDefault();
    const file = e.dataTransfer?.files?.[0];
    if (file) choose(file);
  });
  ui.start.addEventListener("click", () => transcribe());
  ui.cancel.addEventListener("click", () => cancel());
  for (const button of document.querySelectorAll("#file-result .downloads button")) {
    button.addEventListener("click", () => download(button.dataset.format, button));
  }
  ui.transcript.addEventListener("click", (e) => {
    const target = e.target.closest("[data-start]");
    if (target) playFrom(Number(target.dataset.start));
  });
  ui.canvas.addEventListener("click", (e) => {
    const duration = timelineDuration();
    if (!duration) return;
    const rect = ui.canvas.getBoundingClientRect();
    playFrom(((e.clientX - rect.left) / rect.width) * duration);
  });
  ui.audio.addEventListener("play", () => requestAnimationFrame(follow));
  ui.audio.addEventListener("seeked", () => follow());
  new ResizeObserver(() => draw()).observe(ui.canvas);

  function choose(file) {
    state.file = file;
    ui.name.textContent = `${file.name} (${(file.size / 1e6).toFixed(1)} MB)`;
    ui.start.disabled = false;
    showError(ui.error, "");
    state.wave = null;
    decodeWave(file).then((wave) => {
      if (state.file === file) {
        state.wave = wave;
        draw();
      }
    });
  }

  async function transcribe() {
    if (!state.file) return;
    const run = ++state.run;
    const file = state.file;
    showError(ui.error, "");
    ui.result.hidden = true;
    ui.progress.hidden = false;
    ui.start.disabled = true;
    ui.cancel.hidden = false;
    setProgress(ui.upload, ui.uploadText, 0, "");
    setProgress(ui.job, ui.jobText, 0, "Waiting for the upload…");
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("model", "whisper-1");
    form.append("response_format", "verbose_json");
    form.append("timestamp_granularities[]", "word");
    form.append("timestamp_granularities[]", "segment");
    if ($("file-channels").checked) {
      form.append("split_channels", "true"); // the channels are the speakers: no diarization
    } else if ($("file-diarize").checked) {
      form.append("diarize", "true");
      if ($("file-speakers").value) form.append("num_speakers", $("file-speakers").value);
    }
    if ($("file-language").value) form.append("language", $("file-language").value);
    const keyterms = $("file-keyterms").value.trim();
    if (keyterms) form.append("keyterms", keyterms); // a comma list, as the API takes it
    try {
      const job = await upload(form, (f) => setProgress(ui.upload, ui.uploadText, f, `${Math.round(f * 100)} %`));
      setProgress(ui.upload, ui.uploadText, 1, "done");
      state.jobId = job.id;
      const finished = await poll(job.id, run);
      if (!finished) return;
      const result = await apiJson(`v1/jobs/${encodeURIComponent(job.id)}/result?format=verbose_json`);
      if (run !== state.run) return;
      show(result, finished, file);
    } catch (err) {
      if (run === state.run && err.name !== "AbortError") showError(ui.error, describe(err));
    } finally {
      if (run === state.run) {
        ui.start.disabled = false;
        ui.cancel.hidden = true;
        state.xhr = null;
      }
    }
  }

  function upload(form, onProgress) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      state.xhr = xhr;
      xhr.open("POST", "v1/jobs");
      for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v);
      xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
      xhr.onload = async () => {
        if (xhr.status >= 200 && xhr.status < 300) {
          resolve(JSON.parse(xhr.responseText));
        } else {
          reject(await errorFrom(new Response(xhr.responseText, { status: xhr.status, statusText: xhr.statusText })));
        }
      };
      xhr.onerror = () => reject(new UserError("The upload failed: the server could not be reached."));
      xhr.onabort = () => reject(new DOMException("cancelled", "AbortError"));
      xhr.send(form);
    });
  }

  /** Poll the job until it ends; the final job object, or null when cancelled or superseded. */
  async function poll(id, run) {
    for (;;) {
      if (run !== state.run) return null;
      const job = await apiJson(`v1/jobs/${encodeURIComponent(id)}`);
      const total = job.duration_s || 0;
      const speed = job.rtfx ? ` · ${job.rtfx.toFixed(1)}× real time` : "";
      if (job.status === "queued") {
        setProgress(ui.job, ui.jobText, 0, "Waiting in the queue…");
      } else if (job.status === "running") {
        const text = total ? `${job.progress_s.toFixed(1)} s of ${total.toFixed(1)} s${speed}` : "Working…";
        setProgress(ui.job, ui.jobText, job.progress || 0, text);
      } else if (job.status === "succeeded") {
        setProgress(ui.job, ui.jobText, 1, `Done: ${total.toFixed(1)} s${speed}`);
        return job;
      } else if (job.status === "cancelled") {
        setProgress(ui.job, ui.jobText, 0, "Cancelled.");
        return null;
      } else {
        throw new UserError(`The transcription ${job.status}: ${job.error || "no reason given"}.`);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  async function cancel() {
    const run = state.run;
    state.run++; // stop polling
    if (state.xhr) state.xhr.abort();
    if (state.jobId) {
      try {
        await apiFetch(`v1/jobs/${encodeURIComponent(state.jobId)}`, { method: "DELETE" });
      } catch (err) {
        showError(ui.error, describe(err));
      }
    }
    if (state.run === run + 1) {
      ui.jobText.textContent = "Cancelled.";
      ui.start.disabled = false;
      ui.cancel.hidden = true;
    }
  }

  function show(result, job, file) {
    state.result = result;
    colours = new SpeakerColours();
    const turns = result.diarization?.turns || [];
    for (const t of [...turns].sort((a, b) => a.start - b.start)) colours.get(t.speaker);
    for (const s of result.segments || []) if (s.speaker) colours.get(s.speaker);
    if (state.audioUrl) URL.revokeObjectURL(state.audioUrl);
    state.audioUrl = URL.createObjectURL(file);
    ui.audio.src = state.audioUrl;
    ui.result.hidden = false;
    const speakers = colours.speakers;
    const bits = [`${(result.duration || 0).toFixed(1)} s of audio`];
    if (job.rtfx) bits.push(`transcribed at ${job.rtfx.toFixed(1)}× real time`);
    if (speakers.length) bits.push(`${speakers.length} speaker${speakers.length === 1 ? "" : "s"}`);
    if (result.language) bits.push(result.language[0].toUpperCase() + result.language.slice(1));
    ui.stats.textContent = bits.join(" · ");
    renderLegend(turns, speakers);
    renderTranscript(result);
    ui.result.querySelector('[data-format="rttm"]').disabled = turns.length === 0;
    ui.canvas.dataset.speakers = String(speakers.length);
    ui.canvas.dataset.turns = String(turns.length);
    ui.canvas.setAttribute("aria-label", describeTimeline(turns, result.duration));
    draw();
  }

  function renderLegend(turns, speakers) {
    const talk = new Map();
    for (const t of turns) talk.set(t.speaker, (talk.get(t.speaker) || 0) + (t.end - t.start));
    ui.legend.replaceChildren(...speakers.map((s) => el("li", { dataset: { speaker: s, colour: colours.get(s) } },
      el("span", { className: "swatch", attrs: { style: `background:${colours.get(s)}`, "aria-hidden": "true" } }),
      `${s}`, el("span", { className: "talk" }, talk.has(s) ? ` ${talk.get(s).toFixed(1)} s` : ""))));
  }

  function renderTranscript(result) {
    const blocks = [];
    let current = null;
    state.words = [];
    for (const seg of result.segments || []) {
      const speaker = seg.speaker || "";
      if (!current || current.speaker !== speaker) {
        const colour = colours.get(speaker);
        const para = el("p", { className: "turn-text" });
        const head = el("div", { className: "turn-head" },
          speaker ? el("span", { className: "spk-chip" }, speaker) : null,
          el("button", { className: "ts link", dataset: { start: String(seg.start) },
            attrs: { "aria-label": `Play from ${clock(seg.start)}${speaker ? `, ${speaker}` : ""}` } }, clock(seg.start)));
        const block = el("div", { className: "turn", attrs: { style: `--speaker:${colour}` } }, head, para);
        current = { speaker, para, block };
        blocks.push(block);
      } else {
        current.para.append(" ");
      }
      const words = seg.words && seg.words.length ? seg.words : [{ word: seg.text, start: seg.start, end: seg.end }];
      words.forEach((w, i) => {
        const span = el("span", { className: "w", dataset: { start: String(w.start), end: String(w.end) } }, w.word.trim());
        if (i) current.para.append(" ");
        current.para.append(span);
        state.words.push(span);
      });
    }
    if (!blocks.length) blocks.push(el("p", { className: "hint" }, "No speech was found in this file."));
    ui.transcript.replaceChildren(...blocks);
  }

  function timelineDuration() {
    return state.result?.duration || state.wave?.duration || 0;
  }

  function draw() {
    const canvas = ui.canvas;
    const width = canvas.clientWidth;
    const height = canvas.clientHeight;
    if (!width || !height) return;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    drawTimeline(g, width, height, {
      duration: timelineDuration(), wave: state.wave, colours,
      turns: state.result?.diarization?.turns || [], playhead: ui.audio.src ? ui.audio.currentTime : null,
    });
  }

  function follow() {
    draw();
    const t = ui.audio.currentTime;
    const words = state.words;
    let lo = 0;
    let hi = words.length - 1;
    let found = -1;
    while (lo <= hi) { // last word starting at or before t
      const mid = (lo + hi) >> 1;
      if (Number(words[mid].dataset.start) <= t) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    const active = found >= 0 && t <= Number(words[found].dataset.end) + 0.3 ? words[found] : null;
    const old = ui.transcript.querySelector(".w.current");
    if (old !== active) {
      old?.classList.remove("current");
      active?.classList.add("current");
    }
    if (!ui.audio.paused) requestAnimationFrame(follow);
  }

  function playFrom(seconds) {
    if (!ui.audio.src) return;
    ui.audio.currentTime = Math.max(0, seconds);
    ui.audio.play().catch((err) => showError(ui.error, `This browser cannot play the file: ${err.message}`));
  }

  async function download(format, button) {
    const result = state.result;
    if (!result || !state.jobId) return;
    const base = (state.file?.name || "audio").replace(/\.[^.]+$/, "") || "audio";
    button.disabled = true;
    try {
      let blob;
      if (format === "rttm") {
        blob = new Blob([rttm(result.diarization?.turns || [], base)], { type: "text/plain" });
      } else {
        const query = new URLSearchParams({ format: SERVER_FORMATS[format] });
        if (format === "srt" || format === "vtt") {
          query.set("max_line_width", $("sub-width").value);
          query.set("max_line_count", $("sub-lines").value);
          query.set("max_cue_duration", $("sub-seconds").value);
          query.set("speaker_labels", String($("sub-labels").checked));
        }
        const r = await apiFetch(`v1/jobs/${encodeURIComponent(state.jobId)}/result?${query}`);
        blob = await r.blob();
      }
      saveBlob(blob, `${base}.${format}`);
    } catch (err) {
      showError(ui.error, describe(err));
    } finally {
      button.disabled = false;
    }
  }
}

function setProgress(bar, label, fraction, text) {
  bar.value = Math.max(0, Math.min(1, fraction));
  label.textContent = text;
}

/** Peak levels of the file for drawing ({peaks, duration}), or {error} when this browser cannot decode it. */
async function decodeWave(file) {
  if (file.size > MAX_DECODE_BYTES) return { error: "too large to draw" };
  try {
    const data = await file.arrayBuffer();
    const ctx = new OfflineAudioContext(1, 1, 8000);
    const audio = await ctx.decodeAudioData(data);
    const peaks = new Float32Array(WAVE_BUCKETS);
    const per = audio.length / WAVE_BUCKETS;
    for (let c = 0; c < audio.numberOfChannels; c++) {
      const x = audio.getChannelData(c);
      for (let b = 0; b < WAVE_BUCKETS; b++) {
        let peak = 0;
        const end = Math.min(x.length, Math.floor((b + 1) * per));
        for (let i = Math.floor(b * per); i < end; i++) {
          const v = x[i] < 0 ? -x[i] : x[i];
          if (v > peak) peak = v;
        }
        if (peak > peaks[b]) peaks[b] = peak;
      }
    }
    return { peaks, duration: audio.duration };
  } catch (err) {
    return { error: err.message || "cannot decode" };
  }
}

const LANE = 22; // speaker lane height at the top
const AXIS = 18; // time axis at the bottom

/** Speaker lane on top, the waveform (each moment in its speaker's colour over a light band), a time axis. */
function drawTimeline(g, width, height, { duration, wave, turns, colours, playhead }) {
  g.clearRect(0, 0, width, height);
  g.fillStyle = "#f8fafc";
  g.fillRect(0, 0, width, height);
  if (!duration) return;
  const x = (t) => (t / duration) * width;
  const waveTop = LANE + 4;
  const waveHeight = height - waveTop - AXIS;
  const mid = waveTop + waveHeight / 2;
  for (const t of turns) { // bands behind the waveform, and the lane
    const colour = colours.get(t.speaker);
    g.globalAlpha = 0.13;
    g.fillStyle = colour;
    g.fillRect(x(t.start), waveTop, Math.max(1, x(t.end) - x(t.start)), waveHeight);
    g.globalAlpha = 1;
    g.fillRect(x(t.start), 2, Math.max(2, x(t.end) - x(t.start)), LANE - 4);
  }
  g.font = "600 12px system-ui, sans-serif";
  g.textBaseline = "middle";
  for (const t of turns) {
    const w = x(t.end) - x(t.start);
    const label = t.speaker;
    if (g.measureText(label).width + 8 < w) {
      g.fillStyle = "#ffffff";
      g.fillText(label, x(t.start) + 4, LANE / 2);
    }
  }
  const speakerAt = turnFinder(turns);
  if (wave?.peaks) {
    const peaks = wave.peaks;
    const scale = (waveHeight / 2) * 0.95;
    const span = wave.duration / duration; // the decoded length may differ slightly from the server's
    for (let px = 0; px < width; px++) {
      const from = Math.floor(((px / width) * peaks.length) / span);
      const to = Math.max(from + 1, Math.floor((((px + 1) / width) * peaks.length) / span));
      let peak = 0;
      for (let b = from; b < to && b < peaks.length; b++) peak = Math.max(peak, peaks[b]);
      const speaker = speakerAt(((px + 0.5) / width) * duration);
      g.fillStyle = speaker ? colours.get(speaker) : "#64748b";
      const h = Math.max(1, peak * scale);
      g.fillRect(px, mid - h, 1, h * 2);
    }
  } else {
    g.fillStyle = "#475569";
    g.fillRect(0, mid, width, 1);
    g.font = "12px system-ui, sans-serif";
    g.fillText(wave?.error ? `(waveform not drawn: ${wave.error})` : "", 8, mid - 12);
  }
  drawAxis(g, width, height, duration);
  if (playhead !== null && playhead !== undefined) {
    g.fillStyle = "#111827";
    g.fillRect(Math.round(x(playhead)), 0, 2, height - AXIS);
  }
}

function drawAxis(g, width, height, duration) {
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
  const step = steps.find((s) => (s / duration) * width >= 70) || 3600;
  g.fillStyle = "#334155";
  g.font = "11px system-ui, sans-serif";
  g.textBaseline = "top";
  for (let t = 0; t <= duration; t += step) {
    const px = (t / duration) * width;
    g.fillRect(px, height - AXIS, 1, 4);
    g.fillText(clock(t), Math.min(px + 2, width - 30), height - AXIS + 4);
  }
}

/** time -> speaker of the turn covering it (turns sorted once; lookups move forward mostly). */
function turnFinder(turns) {
  const sorted = [...turns].sort((a, b) => a.start - b.start);
  return (t) => {
    let best = null;
    for (const turn of sorted) {
      if (turn.start > t) break;
      if (turn.end >= t) best = turn.speaker;
    }
    return best;
  };
}

function describeTimeline(turns, duration) {
  if (!turns.length) return `Waveform, ${clock(duration || 0)} long, no speaker turns.`;
  const parts = [...turns].sort((a, b) => a.start - b.start).slice(0, 30)
    .map((t) => `${t.speaker} ${clock(t.start)} to ${clock(t.end)}`);
  return `Waveform with speaker timeline: ${parts.join("; ")}${turns.length > 30 ? "; …" : ""}.`;
}

/** RTTM (NIST), one SPEAKER line per turn, as `voxserve diarize` writes it. */
export function rttm(turns, fileId) {
  const uri = fileId.split(/\s+/).join("_") || "audio";
  return turns.map((t) => `SPEAKER ${uri} 1 ${t.start.toFixed(3)} ${(t.end - t.start).toFixed(3)} <NA> <NA> ${t.speaker} <NA> <NA>\n`).join("");
}
