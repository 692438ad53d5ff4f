// Talking to the server: the API key, fetch with errors in words, WebSockets with the key as a subprotocol.

const KEY_STORE = "voxserve.apiKey";
let memoryKey = "";

/** The API key the user pasted ("" when none). Kept in sessionStorage: this tab only, gone when it closes. */
export function apiKey() {
  try {
    return sessionStorage.getItem(KEY_STORE) || memoryKey;
  } catch {
    return memoryKey; // storage blocked (privacy settings): keep it in memory
  }
}

export function setApiKey(key) {
  memoryKey = key.trim();
  try {
    if (memoryKey) sessionStorage.setItem(KEY_STORE, memoryKey);
    else sessionStorage.removeItem(KEY_STORE);
  } catch {
    /* memory only */
  }
  document.dispatchEvent(new CustomEvent("voxserve:key"));
}

/** Headers with `Authorization: Bearer <key>` when a key is set. */
export function authHeaders(extra = {}) {
  const key = apiKey();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : { ...extra };
}

/** An error to show to the user as it is (its message is already in words). */
export class UserError extends Error {
  constructor(message, { status = 0, code = "" } = {}) {
    super(message);
    this.name = "UserError";
    this.status = status;
    this.code = code;
  }
}

const STATUS_WORDS = {
  401: "The server needs an API key: paste it into the “API key” box at the top of the page.",
  403: "The server refused this API key.",
  404: "The server does not have this endpoint (is the optional extra installed?).",
  413: "The file is too large or too long for this server.",
  429: "Too many requests at once from you; wait a moment and try again.",
  503: "The server is busy or still loading its models; try again in a few seconds.",
};

/** A UserError from a failed HTTP response (OpenAI's error shape `{error: {message, code}}`). */
export async function errorFrom(response) {
  let message = "";
  let code = "";
  try {
    const body = await response.json();
    message = body?.error?.message || body?.detail || "";
    code = body?.error?.code || "";
  } catch {
    /* not JSON */
  }
  const lead = STATUS_WORDS[response.status];
  const text = [lead, message && `(${response.status}: ${message})`].filter(Boolean).join(" ")
    || `The server answered ${response.status} ${response.statusText}.`;
  return new UserError(text, { status: response.status, code });
}

/** fetch() with the key; throws a UserError (in words) on network failure or an error status. */
export async function apiFetch(path, options = {}) {
  let response;
  try {
    response = await fetch(path, { ...options, headers: authHeaders(options.headers || {}) });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new UserError(`Could not reach the server: ${err.message}. Is voxserve still running?`);
  }
  if (!response.ok) throw await errorFrom(response);
  return response;
}

export async function apiJson(path, options = {}) {
  return (await apiFetch(path, options)).json();
}

/** ws:// or wss:// URL of a path on this server. */
export function wsUrl(path) {
  const url = new URL(path, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url;
}

// RFC 7230 token characters: what a WebSocket subprotocol may contain.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** A WebSocket to `path`, offering the `realtime` subprotocol and the key as `openai-insecure-api-key.<key>`
 * (browsers cannot set headers on WebSockets); a key that is not a valid token goes as `?api_key=` instead. */
export function openSocket(path) {
  const url = wsUrl(path);
  const key = apiKey();
  const protocols = ["realtime"];
  if (key && TOKEN.test(key)) protocols.push(`openai-insecure-api-key.${key}`);
  else if (key) url.searchParams.set("api_key", key);
  const ws = new WebSocket(url, protocols);
  ws.binaryType = "arraybuffer";
  return ws;
}

const CLOSE_WORDS = {
  1001: "The server closed the connection after a while without activity; start again when you are ready.",
  1006: "The connection to the server was lost.",
  1008: "The server refused the session",
  1009: "A message was too large for the server.",
  1011: "The server could not run this session",
  1013: "The server is busy; try again in a few seconds.",
};

/** Words for a WebSocket close that the user did not ask for (null for a normal close). */
export function describeClose(event) {
  if (event.code === 1000 || event.code === 1005) return null;
  if (event.code === 1001) return CLOSE_WORDS[1001];
  const lead = CLOSE_WORDS[event.code] || `The server closed the connection (code ${event.code})`;
  if (event.code === 1008 && /unauthori[sz]ed/i.test(event.reason)) {
    return "The server refused the connection: it needs a valid API key (paste it at the top of the page).";
  }
  return event.reason ? `${lead.replace(/\.$/, "")}: ${event.reason}.` : lead.endsWith(".") ? lead : `${lead}.`;
}

/** Words for a server `error` event. */
export function describeErrorEvent(event) {
  const e = event.error || {};
  if (e.code === "invalid_api_key") return "The server needs a valid API key: paste it at the top of the page.";
  if (e.code === "idle_timeout") return CLOSE_WORDS[1001];
  return e.message ? `Server error: ${e.message}` : "The server reported an error.";
}

/** Words for any thrown error. */
export function describe(err) {
  if (err instanceof UserError) return err.message;
  if (err && err.name === "NotAllowedError") {
    return "The microphone is blocked. Allow microphone access for this page (the icon in the address bar) and try again.";
  }
  if (err && (err.name === "NotFoundError" || err.name === "OverconstrainedError")) {
    return "No microphone was found. Connect one and try again.";
  }
  if (err && err.name === "NotReadableError") {
    return "The microphone is in use by another program or could not be opened.";
  }
  return `Something went wrong: ${err && err.message ? err.message : err}`;
}
