// The inspector's entry: state in the URL (deep links), the app/user picker, the
// key dialog and the views. Every data call goes through api.js (the JSON API only).

import { api, getKey, onKeyNeeded, setKey } from "./api.js";
import { clear, h, showError } from "./dom.js";
import * as memories from "./views/memories.js";
import * as recall from "./views/recall.js";
import * as session from "./views/session.js";
import * as compile from "./views/compile.js";
import * as health from "./views/health.js";

const VIEWS = {
  memories: { title: "Memories", mod: memories, needsUser: true },
  recall: { title: "Recall", mod: recall, needsUser: true },
  session: { title: "Sessions", mod: session, needsUser: true },
  compile: { title: "Compile", mod: compile, needsUser: true },
  health: { title: "Store health", mod: health, needsUser: false },
};
// The URL's parameters the page reads and writes (everything else is ignored).
const PARAMS = ["app_name", "user_id", "view", "q", "mode", "top_k", "session_id", "kind",
  "filter_session", "since", "until"];

const $ = (id) => document.getElementById(id);
let apps = [];
let appsSkipped = []; // shards GET /v1/apps could not read (damaged)
let renderToken = 0;

function readState() {
  const p = new URLSearchParams(window.location.search);
  const state = {};
  for (const k of PARAMS) if (p.get(k)) state[k] = p.get(k);
  if (!VIEWS[state.view]) state.view = "memories";
  return state;
}

function urlOf(state) {
  const p = new URLSearchParams();
  for (const k of PARAMS) {
    if (!state[k] || (k === "view" && state[k] === "memories")) continue;
    p.set(k, state[k]);
  }
  const qs = p.toString();
  return window.location.pathname + (qs ? "?" + qs : "");
}

let state = readState();

// push: a new history entry (a new view, user or session); else the URL is replaced.
function navigate(patch, { push = true } = {}) {
  state = { ...state, ...patch };
  for (const [k, v] of Object.entries(patch)) if (v === null || v === undefined || v === "") delete state[k];
  if (!VIEWS[state.view]) state.view = "memories";
  const url = urlOf(state);
  if (url !== window.location.pathname + window.location.search) {
    history[push ? "pushState" : "replaceState"](null, "", url);
  }
  render();
}

// A real link to another state of the page (its deep link); a plain click navigates in place.
function link(patch, text, attrs = {}) {
  const target = { ...state, ...patch };
  for (const [k, v] of Object.entries(patch)) if (v === null) delete target[k];
  return h("a", { ...attrs, href: urlOf(target), onclick: (e) => {
    if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    navigate(patch);
  } }, text);
}

// Remember a view's inputs in the URL without re-rendering (deep link to what is shown).
function remember(patch) {
  state = { ...state, ...patch };
  for (const [k, v] of Object.entries(patch)) if (v === null || v === undefined || v === "") delete state[k];
  history.replaceState(null, "", urlOf(state));
}

// -- the key dialog: one prompt at a time, however many calls got a 401 ----------------
let pendingKey = null;
function askForKey(reason) {
  if (pendingKey) return pendingKey;
  const dialog = $("key-dialog");
  $("key-reason").textContent = reason;
  $("key-input").value = "";
  pendingKey = new Promise((resolve) => {
    const done = (key) => {
      dialog.close();
      pendingKey = null;
      resolve(key);
    };
    // "" (submitted empty): no key; null: cancelled.
    $("key-form").onsubmit = (e) => { e.preventDefault(); done($("key-input").value.trim()); };
    $("key-cancel").onclick = () => done(null);
    dialog.oncancel = (e) => { e.preventDefault(); done(null); };
    dialog.showModal();
    $("key-input").focus();
  });
  return pendingKey;
}

// -- header: the app and user pickers ------------------------------------------------------
function fillPickers() {
  const appList = $("apps-list");
  clear(appList, apps.map((a) => h("option", { value: a.app_name }, `${a.memories} memories`)));
  const app = apps.find((a) => a.app_name === $("app-input").value);
  clear($("users-list"), (app?.users || []).map((u) =>
    h("option", { value: u.user_id }, `${u.memories} memories`)));
}

async function loadApps() {
  try {
    const res = await api("/v1/apps");
    apps = res.apps || [];
    appsSkipped = res.skipped_shards || [];
  } catch (err) {
    apps = [];
    appsSkipped = [];
    showError($("page-error"), err);
  }
  if (!state.app_name && apps.length === 1) {
    state.app_name = apps[0].app_name;
    history.replaceState(null, "", urlOf(state));
  }
  $("app-input").value = state.app_name || "";
  fillPickers();
}

function renderNav() {
  clear($("nav"), Object.entries(VIEWS).map(([name, v]) => link({ view: name }, v.title,
    { testid: `nav-${name}`, "aria-current": state.view === name ? "page" : null })));
}

function pickUserPrompt(container) {
  const list = h("ul", { class: "user-picker", testid: "user-picker" });
  for (const a of apps) {
    const users = a.users;
    list.append(h("li", {}, h("strong", {}, a.app_name), ` (${a.memories} memories)`,
      users ? h("ul", {}, users.map((u) => h("li", {}, h("button", {
        type: "button", class: "link", testid: `pick-${a.app_name}-${u.user_id}`,
        onclick: () => navigate({ app_name: a.app_name, user_id: u.user_id }),
      }, `${u.user_id} (${u.memories})`))))
        : h("p", { class: "muted" }, "Type a user id above: this key does not list users."),
      a.users_truncated ? h("p", { class: "muted", testid: "users-truncated" },
        `Only the first ${users ? users.length : 0} users by name are listed: type another user id above.`) : null));
  }
  const skipped = appsSkipped.length ? h("p", { class: "bad", testid: "skipped-shards" },
    `Shard(s) ${appsSkipped.join(", ")} could not be read (run doctor): their users are not listed.`) : null;
  clear(container, h("h2", {}, "Pick an app and a user"), skipped,
    apps.length ? list : h("p", { class: "muted" },
      "No app with memories or sessions yet (or this key reaches none): type an app and a user above."));
  container.dataset.ready = "pick";
}

async function render() {
  const token = ++renderToken;
  const view = VIEWS[state.view];
  const main = $("view");
  main.dataset.ready = "";
  main.dataset.view = state.view;
  showError($("page-error"), null);
  $("app-input").value = state.app_name || "";
  $("user-input").value = state.user_id || "";
  fillPickers();
  renderNav();
  document.title = `${view.title} · mnemoray inspector`;
  if (view.needsUser && !(state.app_name && state.user_id)) {
    pickUserPrompt(main);
    return;
  }
  const ctx = {
    state, navigate, remember, apps, link,
    stale: () => token !== renderToken,
    error: (err) => showError($("page-error"), err),
  };
  clear(main);
  try {
    await view.mod.render(ctx, main);
    if (token === renderToken) main.dataset.ready = state.view;
  } catch (err) {
    if (token !== renderToken) return;
    showError($("page-error"), err);
    main.dataset.ready = "error";
  }
}

function wireHeader() {
  $("who-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const app = $("app-input").value.trim(), user = $("user-input").value.trim();
    const view = state.view === "health" ? "memories" : state.view;
    navigate({ app_name: app, user_id: user, view, session_id: null, filter_session: null });
  });
  $("app-input").addEventListener("change", fillPickers);
  $("key-button").addEventListener("click", async () => {
    const key = await askForKey(getKey() ? "Replace or clear this tab's key (empty: no key)." : "Enter an API key for this tab.");
    if (key === null) return;
    setKey(key);
    await loadApps();
    render();
  });
}

onKeyNeeded(askForKey);
window.addEventListener("popstate", () => { state = readState(); render(); });
wireHeader();
loadApps().then(render);
