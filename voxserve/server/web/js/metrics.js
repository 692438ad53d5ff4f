// Metrics panel: the server's own Prometheus metrics (/metrics), summarised: streams in progress, RTFx,
// latency percentiles estimated from the histograms (as Prometheus' histogram_quantile does).

import { apiFetch, describe } from "./api.js";
import { $, el, showError } from "./ui.js";

const EVERY_MS = 3000;

/** Prometheus text format -> Map(name -> [{labels, value}]). */
export function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const pair of (m[3] || "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    const value = Number(m[4]);
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value });
  }
  return out;
}

function matches(labels, filter) {
  return Object.entries(filter).every(([k, v]) => labels[k] === v);
}

/** Sum of a family's samples whose labels include `filter` (null when the family is absent). */
export function total(metrics, name, filter = {}) {
  const samples = metrics.get(name);
  if (!samples) return null;
  return samples.filter((s) => matches(s.labels, filter)).reduce((a, s) => a + s.value, 0);
}

/** {count, sum, quantile(q)} of a histogram, its series summed over labels matching `filter`. */
export function histogram(metrics, name, filter = {}) {
  const buckets = new Map();
  for (const s of metrics.get(`${name}_bucket`) || []) {
    if (!matches(s.labels, filter)) continue;
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    buckets.set(le, (buckets.get(le) || 0) + s.value);
  }
  const sorted = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
  const count = total(metrics, `${name}_count`, filter) || 0;
  const sum = total(metrics, `${name}_sum`, filter) || 0;
  const quantile = (q) => {
    if (!count || !sorted.length) return null;
    const rank = q * count;
    let prevLe = 0;
    let prevCount = 0;
    for (const [le, cum] of sorted) {
      if (cum >= rank) {
        if (le === Infinity) return prevLe; // beyond the last bucket: its bound is the best estimate
        const inBucket = cum - prevCount;
        return inBucket > 0 ? prevLe + ((le - prevLe) * (rank - prevCount)) / inBucket : le;
      }
      prevLe = le;
      prevCount = cum;
    }
    return prevLe;
  };
  return { count, sum, quantile };
}

/** "p50 120 · p90 340 · p99 800 ms" (milliseconds, the unit once at the end). */
function percentiles(h, qs = [0.5, 0.9, 0.99]) {
  if (!h.count) return "no data yet";
  const names = { 0.5: "p50", 0.9: "p90", 0.99: "p99" };
  const value = (q) => {
    const v = h.quantile(q);
    return v === null ? "–" : String(Math.round(v * 1000));
  };
  return { text: `${qs.map((q) => `${names[q]} ${value(q)}`).join(" · ")} ms`, n: h.count };
}

/** The rows shown: [label, value, key]. */
export function summarise(m) {
  const gauge = (name) => {
    const v = total(m, name);
    return v === null ? "–" : String(Math.round(v));
  };
  const rtfx = histogram(m, "voxserve_rtfx");
  const rows = [
    ["Live streams", gauge("voxserve_live_streams"), "live_streams"],
    ["Agent conversations", gauge("voxserve_agent_sessions"), "agent_sessions"],
    ["Speech synthesis streams", gauge("voxserve_tts_streams"), "tts_streams"],
    ["Transcriptions in progress", gauge("voxserve_inflight_requests"), "inflight"],
    ["RTFx (files and jobs)", rtfx.count
      ? { text: `mean ${(rtfx.sum / rtfx.count).toFixed(1)}× real time`, n: rtfx.count }
      : "no data yet", "rtfx"],
    ["Live final-text latency", percentiles(histogram(m, "voxserve_live_final_latency_seconds")), "live_latency"],
    ["Model batch (chunk) time", percentiles(histogram(m, "voxserve_batch_seconds")), "batch"],
    ["Speech TTFB", percentiles(histogram(m, "voxserve_tts_ttfb_seconds"), [0.5, 0.9]), "tts_ttfb"],
    ["Agent reply latency", percentiles(histogram(m, "voxserve_agent_reply_latency_seconds", { part: "total" }), [0.5, 0.9]), "agent_latency"],
  ];
  const audio = total(m, "voxserve_audio_seconds");
  if (audio !== null) rows.push(["Audio processed", `${(audio / 60).toFixed(1)} min`, "audio"]);
  return rows;
}

export function setupMetrics() {
  const panel = $("metrics");
  const list = $("metrics-list");
  const error = $("metrics-error");
  let timer = null;

  async function refresh() {
    timer = null;
    if (!panel.open || document.hidden) return schedule();
    try {
      const text = await (await apiFetch("metrics")).text();
      const rows = summarise(parseMetrics(text));
      list.replaceChildren(...rows.map(([label, value, key]) => {
        if (typeof value === "string") return el("div", { dataset: { metric: key } }, el("dt", {}, label), el("dd", {}, value));
        return el("div", { dataset: { metric: key } },
          el("dt", {}, label, " ", el("span", { className: "n" }, `(n=${value.n})`)),
          el("dd", { className: "wide" }, value.text));
      }));
      showError(error, "");
    } catch (err) {
      showError(error, err.status === 401 ? "Paste the API key at the top of the page to see the metrics." : describe(err));
    }
    schedule();
  }

  function schedule() {
    if (timer === null) timer = setTimeout(refresh, EVERY_MS);
  }

  panel.addEventListener("toggle", () => { if (panel.open) { clearTimeout(timer); timer = null; refresh(); } });
  document.addEventListener("visibilitychange", () => { if (!document.hidden && panel.open) { clearTimeout(timer); timer = null; refresh(); } });
  document.addEventListener("voxserve:key", () => { clearTimeout(timer); timer = null; refresh(); });
  refresh();
}
