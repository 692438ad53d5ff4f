// voxserve's web page: tabs, the API key, server status, and the four tabs' modules.

import { apiJson, apiKey, describe, setApiKey, UserError } from "./js/api.js";
import { setupAgent } from "./js/agent.js";
import { setupFile } from "./js/file.js";
import { setupLive } from "./js/live.js";
import { setupMetrics } from "./js/metrics.js";
import { setupSpeak } from "./js/speak.js";
import { $, el, showError } from "./js/ui.js";

const TABS = ["live", "file", "speak", "agent"];

/** WAI-ARIA tabs: arrow keys, Home and End move between tabs; the URL hash remembers the tab. */
function setupTabs() {
  const tabs = TABS.map((name) => $(`tab-${name}`));
  const select = (name, focus = false) => {
    for (const tab of tabs) {
      const on = tab.id === `tab-${name}`;
      tab.setAttribute("aria-selected", String(on));
      tab.tabIndex = on ? 0 : -1;
      $(tab.getAttribute("aria-controls")).hidden = !on;
      if (on && focus) tab.focus();
    }
    if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  };
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => select(TABS[i]));
    tab.addEventListener("keydown", (e) => {
      const moves = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 };
      if (!(e.key in moves)) return;
      e.preventDefault();
      select(TABS[(moves[e.key] + tabs.length) % tabs.length], true);
    });
  });
  const fromHash = () => TABS.includes(location.hash.slice(1)) && select(location.hash.slice(1));
  window.addEventListener("hashchange", fromHash);
  fromHash();
}

/** The API key box: applied on submit (Enter); the page re-checks the server with it. */
function setupKey(onChange) {
  const input = $("api-key");
  input.value = apiKey();
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    setApiKey(input.value);
    onChange();
  });
}

/** /ready and an authenticated call: what the server can do, in words at the top of the page. */
async function checkServer() {
  const status = $("server-status");
  const global = $("global-error");
  let ready;
  try {
    const r = await fetch("ready");
    ready = await r.json().catch(() => ({}));
    if (!r.ok && ready.status !== "loading") throw new UserError(`The server answered ${r.status}.`);
  } catch (err) {
    status.textContent = "Server unreachable";
    showError(global, err instanceof UserError ? err.message : "Cannot reach the voxserve server. Is it running?");
    setTimeout(checkServer, 5000);
    return;
  }
  if (ready.status !== "ready") {
    status.textContent = "Loading models…";
    setTimeout(checkServer, 2000);
    return;
  }
  try {
    await apiJson("v1/models");
    status.textContent = `Ready · ${(ready.models || []).join(", ")}`;
    showError(global, "");
  } catch (err) {
    status.textContent = "Ready · API key needed";
    showError(global, describe(err));
    if (err.status === 401) $("api-key").focus();
  }
}

/** The voices (GET /v1/audio/voices), fetched once per key; {ok, data} or {ok: false, message}. */
function voiceList() {
  let pending = null;
  document.addEventListener("voxserve:key", () => { pending = null; });
  return () => {
    pending ??= apiJson("v1/audio/voices").then(
      (body) => (body.data?.length ? { ok: true, data: body.data }
        : { ok: false, message: "This server has no voices." }),
      (err) => {
        pending = null; // try again next time
        const message = err.status === 404 || err.status === 501 || /not installed|unavailable/i.test(err.message)
          ? "Speech synthesis is not installed on this server (pip install 'voxserve[tts]')."
          : describe(err);
        return { ok: false, message };
      },
    );
    return pending;
  };
}

async function fillVoices(voices) {
  const list = await voices();
  if (!list.ok) return;
  for (const id of ["speak-voice", "agent-voice"]) {
    const select = $(id);
    const keep = select.value;
    select.replaceChildren(el("option", { value: "" }, "Default"),
      ...list.data.map((v) => el("option", { value: v.id }, `${v.id}${v.language ? ` (${v.language})` : ""}`)));
    select.value = keep;
  }
}

function main() {
  const voices = voiceList();
  setupTabs();
  setupKey(() => { checkServer(); fillVoices(voices); });
  setupLive();
  setupFile();
  setupSpeak(voices);
  setupAgent();
  setupMetrics();
  checkServer();
  fillVoices(voices);
  document.documentElement.dataset.ready = "true"; // the page's scripts are running (tests wait for this)
}

main();
