// Small DOM helpers shared by the tabs.

export const $ = (id) => document.getElementById(id);

/** document.createElement with properties, attributes (`attrs`) and children. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  const { attrs, dataset, ...rest } = props;
  Object.assign(node, rest);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const [k, v] of Object.entries(dataset || {})) node.dataset[k] = v;
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

/** Show `message` in an error region (role="alert"), or hide it when message is empty. */
export function showError(region, message) {
  region.textContent = message || "";
  region.hidden = !message;
}

/** 75.4 -> "1:15". */
export function clock(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${rest}` : `${m}:${rest}`;
}

export function ms(value) {
  return value === null || value === undefined || Number.isNaN(value) ? "–" : `${Math.round(value)} ms`;
}

// Speaker colours: distinct hues, dark enough for 3:1 against white as lines and bands, and used
// with dark text on a light tint of the same hue (contrast over 7:1).
const PALETTE = ["#1d4ed8", "#c2410c", "#047857", "#7e22ce", "#b91c1c", "#0e7490", "#be185d", "#4d7c0f"];

/** A colour per speaker label, stable in order of first appearance. */
export class SpeakerColours {
  constructor() {
    this.map = new Map();
  }

  get(speaker) {
    if (!speaker) return "#4b5563";
    if (!this.map.has(speaker)) this.map.set(speaker, PALETTE[this.map.size % PALETTE.length]);
    return this.map.get(speaker);
  }

  get speakers() {
    return [...this.map.keys()];
  }
}

/** A level bar (0..1) that eases down. */
export class LevelMeter {
  constructor(fill) {
    this.fill = fill;
    this.value = 0;
  }

  set(level) {
    this.value = Math.max(level, this.value * 0.7);
    const pct = Math.min(100, Math.round(Math.sqrt(this.value) * 100));
    this.fill.style.width = `${pct}%`;
  }
}

/** A median of numbers (null for none). */
export function median(values) {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}
