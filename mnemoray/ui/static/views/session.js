// Sessions: the list, then one session's event timeline with its state changes by
// scope, compaction events (and the raw events each covers) and its artifacts.

import { api } from "../api.js";
import { clear, facts, fmtTime, h, loading, short } from "../dom.js";

const SCOPES = ["app", "user", "temp"];
export const scopeOf = (key) => (SCOPES.find((s) => key.startsWith(s + ":")) || "session");

function byScope(delta) {
  const out = {};
  for (const [k, v] of Object.entries(delta || {})) (out[scopeOf(k)] ||= []).push([k, v]);
  return out;
}

const show = (v) => (typeof v === "string" ? v : JSON.stringify(v));

function stateChips(delta, testid) {
  const groups = byScope(delta);
  if (!Object.keys(groups).length) return null;
  return h("div", { class: "chips", testid }, Object.entries(groups).map(([scope, kv]) =>
    kv.map(([k, v]) => h("span", { class: "chip scope", "data-scope": scope, title: `${scope} scope` },
      h("span", { class: "muted" }, `${scope} · `), `${scope === "session" ? k : k.slice(scope.length + 1)} = ${short(show(v), 80)}`))));
}

function eventBody(e) {
  if (e.type === "tool_call") return h("code", {}, `${e.data.name}(${short(JSON.stringify(e.data.args), 200)})`);
  if (e.type === "tool_result") return h("code", {}, `${e.data.name} → ${short(JSON.stringify(e.data.response), 300)}`);
  return h("div", { class: "text" }, e.text || (Object.keys(e.data || {}).length ? JSON.stringify(e.data) : ""));
}

function eventItem(e, byId) {
  const li = h("li", { class: `role-${e.role} type-${e.type}`, testid: `event-${e.type}`, "data-event-id": e.id },
    h("div", { class: "meta muted" }, `${fmtTime(e.timestamp)} · ${e.author} (${e.role}, ${e.type}) · `, h("code", {}, e.id)),
    eventBody(e), stateChips(e.state_delta, "state-delta"),
    Object.keys(e.artifact_delta || {}).length ? h("div", { class: "chips" }, h("span", { class: "chips-label" }, "Artifacts:"),
      Object.entries(e.artifact_delta).map(([n, v]) => h("span", { class: "chip" }, `${n} v${v}`))) : null);
  if (e.type === "compaction") {
    const ids = e.data.source_event_ids || [];
    const raw = ids.length ? ids.map((id) => byId.get(id)).filter(Boolean)
      : [...byId.values()].filter((x) => x.type !== "compaction" && x.timestamp >= e.data.start_ts && x.timestamp <= e.data.end_ts);
    const box = h("ol", { class: "timeline", testid: "compaction-raw" });
    const btn = h("button", { type: "button", class: "secondary", "aria-expanded": "false", testid: "compaction-toggle",
      onclick: () => {
        const open = btn.getAttribute("aria-expanded") === "true";
        btn.setAttribute("aria-expanded", String(!open));
        if (open) clear(box); else clear(box, raw.map((x) => eventItem(x, new Map())));
      } }, `Show the ${raw.length} raw event(s) it covers`);
    li.append(h("div", { class: "muted" }, `Covers ${fmtTime(e.data.start_ts)} – ${fmtTime(e.data.end_ts)}`), btn, box);
  }
  return li;
}

async function artifactsPanel(ctx, sessionId) {
  const base = `/v1/artifacts/${[ctx.state.app_name, ctx.state.user_id, sessionId].map(encodeURIComponent).join("/")}`;
  const names = (await api(base)).names || [];
  if (!names.length) return h("p", { class: "muted", testid: "artifacts" }, "No artifacts.");
  const rows = await Promise.all(names.map(async (name) => {
    const versions = (await api(`${base}/${encodeURIComponent(name)}/versions`)).versions || [];
    const view = h("div", {});
    return h("li", { testid: "artifact" }, h("strong", {}, name), " versions: ",
      versions.map((v) => [h("button", { type: "button", class: "link", testid: "artifact-version",
        onclick: async () => {
          clear(view, loading());
          try {
            const got = await api(`${base}/${encodeURIComponent(name)}`, { query: { version: v }, raw: true });
            clear(view, h("p", { class: "muted" }, `${name} v${v} (${got.type})`), h("pre", {}, short(got.text, 4000)));
          } catch (err) { clear(view, h("p", { class: "error" }, err.message)); }
        } }, `v${v}`), " "]), view);
  }));
  return h("ul", { testid: "artifacts" }, rows);
}

async function list(ctx, main) {
  const s = ctx.state;
  const res = await api("/v1/sessions", { query: { app_name: s.app_name, user_id: s.user_id } });
  const sessions = (res.sessions || []).slice().sort((a, b) => b.updated_at - a.updated_at);
  clear(main, h("h2", {}, `Sessions of ${s.user_id} in ${s.app_name}`),
    sessions.length ? h("table", { testid: "session-list" },
      h("thead", {}, h("tr", {}, ["Session", "Events", "Created", "Updated", "Ended"].map((t) => h("th", {}, t)))),
      h("tbody", {}, sessions.map((x) => h("tr", {},
        h("td", {}, ctx.link({ session_id: x.session_id }, x.session_id, { testid: "session-link" })),
        h("td", { class: "num" }, String(x.num_events)), h("td", {}, fmtTime(x.created_at)),
        h("td", {}, fmtTime(x.updated_at)), h("td", {}, x.ended_at ? fmtTime(x.ended_at) : "open")))))
      : h("p", {}, "No sessions."));
}

export async function render(ctx, main) {
  const s = ctx.state;
  main.append(loading());
  if (!s.session_id) return list(ctx, main);
  const sess = await api(`/v1/sessions/${encodeURIComponent(s.session_id)}`,
    { query: { app_name: s.app_name, user_id: s.user_id } });
  const arts = await artifactsPanel(ctx, s.session_id).catch((err) => h("p", { class: "error" }, err.message));
  if (ctx.stale()) return;
  const byId = new Map(sess.events.map((e) => [e.id, e]));
  const changes = sess.events.filter((e) => Object.keys(e.state_delta || {}).length);
  const compactions = sess.events.filter((e) => e.type === "compaction").length;
  clear(main,
    h("p", {}, ctx.link({ session_id: null }, "← all sessions"), " · ",
      ctx.link({ view: "compile" }, "compile this session")),
    h("h2", { testid: "session-title" }, `Session ${sess.session_id}`),
    h("div", { class: "grid2" },
      h("section", { class: "panel" }, h("h3", {}, "Overview"),
        facts([["Events", String(sess.events.length)], ["Compactions", String(compactions)],
          ["Version", String(sess.version)], ["Created", fmtTime(sess.created_at)],
          ["Updated", fmtTime(sess.updated_at)], ["Ended", sess.ended_at ? fmtTime(sess.ended_at) : "open"]]),
        h("h3", {}, "Current state by scope"),
        stateChips(sess.state, "session-state") || h("p", { class: "muted" }, "Empty state.")),
      h("section", { class: "panel" }, h("h3", {}, "Artifacts"), arts,
        h("h3", {}, "State changes"), changes.length ? h("ol", { testid: "state-changes" }, changes.map((e) =>
          h("li", { class: "inline-item" }, h("span", { class: "muted" }, `${fmtTime(e.timestamp)} ${e.author}: `), stateChips(e.state_delta))))
          : h("p", { class: "muted" }, "None."))),
    h("h3", {}, "Timeline"),
    h("ol", { class: "timeline", testid: "session-timeline" }, sess.events.map((e) => eventItem(e, byId))));
}
