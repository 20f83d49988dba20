// The page's one data path: the JSON API, with the key the user entered (kept in
// this tab's sessionStorage only). A 401 asks for a key and retries once.

const KEY_ITEM = "mnemoray.apiKey";

export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

let askKey = async () => null; // set by the app: resolves with a key, or null when cancelled

export function onKeyNeeded(fn) { askKey = fn; }
export function getKey() { return sessionStorage.getItem(KEY_ITEM) || ""; }
export function setKey(key) {
  if (key) sessionStorage.setItem(KEY_ITEM, key);
  else sessionStorage.removeItem(KEY_ITEM);
}

function url(path, query) {
  const u = new URL(path, window.location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v === null || v === undefined || v === "") continue;
    for (const item of Array.isArray(v) ? v : [v]) u.searchParams.append(k, item);
  }
  return u.pathname + u.search;
}

async function errorOf(resp) {
  let message = `${resp.status} ${resp.statusText}`;
  let field = null;
  try {
    const body = await resp.json();
    const err = body && body.error;
    if (err && err.message) { message = `${resp.status}: ${err.message}`; field = err.field; }
    else if (body && body.detail) message = `${resp.status}: ${JSON.stringify(body.detail)}`;
  } catch { /* not JSON: keep the status line */ }
  return new ApiError(resp.status, message, field);
}

// raw: answer the Response's text (artifact payloads) instead of parsing JSON.
export async function api(path, { method = "GET", query, body, raw = false } = {}, retried = false) {
  const headers = { Accept: "application/json" };
  const key = getKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let resp;
  try {
    resp = await fetch(url(path, query), {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (exc) {
    throw new ApiError(0, `the server did not answer (${exc.message})`);
  }
  if (resp.status === 401 && !retried) {
    const fresh = await askKey(key ? "That key was refused; enter another." : "This server needs an API key.");
    if (fresh) { setKey(fresh); return api(path, { method, query, body, raw }, true); }
  }
  if (!resp.ok) throw await errorOf(resp);
  // The stored type: most artifacts are answered as application/octet-stream (downloads).
  if (raw) {
    const stored = resp.headers.get("x-artifact-mime-type");
    return { text: await resp.text(), type: stored ? decodeURIComponent(stored) : resp.headers.get("content-type") || "" };
  }
  return resp.status === 204 ? null : resp.json();
}
