// Memories of one user: filters (kind, session, time), a plot over time, and each
// memory with its provenance (source events shown in their session), topics, facts,
// validity, versions; forget and correct, each after a confirmation.

import { api } from "../api.js";
import { chips, clear, facts, fmtTime, h, loading } from "../dom.js";
import { timeHistogram } from "../plots.js";

export const KINDS = ["session_summary", "fact", "chunk", "compaction_summary",
  "consolidated_summary"];
const PAGE = 500, MAX_ROWS = 2000, SHOWN_STEP = 50;

const daySeconds = (date, end) => (date ? Date.parse(`${date}T00:00:00Z`) / 1000 + (end ? 86399 : 0) : null);
const eventTime = (m) => m.event_time_start ?? m.created_at;

export async function loadAll(state) {
  const out = [];
  let cursor = null;
  do {
    const page = await api("/v1/memories", { query: {
      app_name: state.app_name, user_id: state.user_id, limit: PAGE, cursor,
      kind: state.kind, session_id: state.filter_session,
      since: daySeconds(state.since, false), until: daySeconds(state.until, true) } });
    out.push(...page.memories);
    cursor = page.next_cursor;
  } while (cursor && out.length < MAX_ROWS);
  return { memories: out, truncated: Boolean(cursor) };
}

function filterForm(ctx, sessions) {
  const s = ctx.state;
  const kind = h("select", { name: "kind", testid: "filter-kind" },
    h("option", { value: "" }, "any kind"),
    KINDS.map((k) => h("option", { value: k, selected: s.kind === k }, k)));
  const session = h("select", { name: "session", testid: "filter-session" },
    h("option", { value: "" }, "any session"),
    sessions.map((x) => h("option", { value: x.session_id,
      selected: s.filter_session === x.session_id }, x.session_id)));
  if (s.filter_session && !sessions.some((x) => x.session_id === s.filter_session)) {
    session.append(h("option", { value: s.filter_session, selected: true }, s.filter_session));
  }
  const since = h("input", { type: "date", name: "since", value: s.since || "", testid: "filter-since" });
  const until = h("input", { type: "date", name: "until", value: s.until || "", testid: "filter-until" });
  return h("form", { class: "inline", testid: "filter-form", "aria-label": "Filter memories",
    onsubmit: (e) => {
      e.preventDefault();
      ctx.navigate({ kind: kind.value, filter_session: session.value, since: since.value,
        until: until.value }, { push: false });
    } },
  h("label", {}, "Kind", kind), h("label", {}, "Session", session),
  h("label", {}, "Since (UTC day)", since), h("label", {}, "Until (UTC day)", until),
  h("button", { type: "submit", testid: "filter-apply" }, "Apply filters"));
}

const sessionCache = new Map();
async function sessionOf(ctx, sessionId) {
  const key = `${ctx.state.app_name}/${ctx.state.user_id}/${sessionId}`;
  if (!sessionCache.has(key)) {
    sessionCache.set(key, api(`/v1/sessions/${encodeURIComponent(sessionId)}`, {
      query: { app_name: ctx.state.app_name, user_id: ctx.state.user_id } }));
  }
  try { return await sessionCache.get(key); } catch (err) { sessionCache.delete(key); throw err; }
}

// The source events with one event either side, in session order.
function sourceEvents(session, ids) {
  const want = new Set(ids);
  const at = session.events.map((e, i) => (want.has(e.id) ? i : -1)).filter((i) => i >= 0);
  const keep = new Set(at.flatMap((i) => [i - 1, i, i + 1]).filter((i) => i >= 0 && i < session.events.length));
  const missing = ids.length - at.length;
  return h("div", { testid: "source-events" },
    h("ol", { class: "timeline" }, [...keep].sort((a, b) => a - b).map((i) => {
      const e = session.events[i];
      return h("li", { class: `role-${e.role} type-${e.type}${want.has(e.id) ? " highlight" : ""}` },
        h("span", { class: "meta" }, `${fmtTime(e.timestamp)} · ${e.author} (${e.role}, ${e.type})`,
          want.has(e.id) ? " · source" : " · context"), h("div", { class: "text" }, e.text || JSON.stringify(e.data)));
    })),
    missing ? h("p", { class: "muted" }, `${missing} source event(s) are no longer in the session (compacted or from an archive).`) : null);
}

function provenance(ctx, m) {
  const box = h("div", {});
  const ids = m.source_event_ids || [];
  const link = ctx.link({ view: "session", session_id: m.session_id }, m.session_id);
  const btn = ids.length ? h("button", { type: "button", class: "secondary", testid: "source-events-button",
    "aria-expanded": "false",
    onclick: async () => {
      if (btn.getAttribute("aria-expanded") === "true") { clear(box); btn.setAttribute("aria-expanded", "false"); return; }
      btn.setAttribute("aria-expanded", "true");
      clear(box, loading("Loading the session…"));
      try { clear(box, sourceEvents(await sessionOf(ctx, m.session_id), ids)); }
      catch (err) { clear(box, h("p", { class: "error" }, err.message)); }
    } }, `Show ${ids.length} source event(s) in context`) : null;
  return [h("div", { class: "row" }, h("span", {}, "Session ", link), btn), box];
}

function actions(ctx, m, card, status) {
  const area = h("div", {});
  const done = (msg) => { status.textContent = msg; };
  const forget = () => {
    const reason = h("input", { name: "reason", placeholder: "why (kept on the forget record)", testid: "forget-reason" });
    clear(area, h("div", { class: "confirm", role: "group", "aria-label": "Confirm forget" },
      h("p", {}, "Forget this memory? Recall will never return it again."),
      h("div", { class: "row" }, h("label", {}, "Reason", reason),
        h("button", { type: "button", class: "danger", testid: "forget-confirm", onclick: async (e) => {
          e.target.disabled = true;
          try {
            await api(`/v1/memories/${encodeURIComponent(m.memory_id)}`, { method: "DELETE",
              query: { app_name: ctx.state.app_name, user_id: ctx.state.user_id, reason: reason.value } });
            card.replaceWith(h("p", { class: "ok", role: "status", testid: "forgotten" }, `Forgot ${m.memory_id}.`));
          } catch (err) { e.target.disabled = false; clear(area, h("p", { class: "error" }, err.message)); }
        } }, "Yes, forget it"),
        h("button", { type: "button", class: "secondary", onclick: () => clear(area) }, "Cancel"))));
    area.querySelector("[data-testid=forget-confirm]").focus();
  };
  const correct = () => {
    const text = h("textarea", { name: "text", testid: "correct-text", "aria-label": "Corrected text" }, m.text);
    const save = async () => {
      try {
        await api(`/v1/memories/${encodeURIComponent(m.memory_id)}`, { method: "PATCH",
          body: { app_name: ctx.state.app_name, user_id: ctx.state.user_id, text: text.value } });
        done("Corrected: the old text is kept as a version.");
        ctx.navigate({}, { push: false });
      } catch (err) { clear(area, h("p", { class: "error" }, err.message)); }
    };
    clear(area, h("form", { class: "confirm", testid: "correct-form", onsubmit: (e) => {
      e.preventDefault();
      if (!text.value.trim() || text.value === m.text || e.target.querySelector("[data-testid=correct-confirm]")) return;
      const confirmBox = h("div", { role: "group", "aria-label": "Confirm correction" },
        h("p", {}, "Replace the text? The memory is re-embedded; the old text stays as a version."),
        h("button", { type: "button", class: "danger", testid: "correct-confirm", onclick: save }, "Yes, replace it"),
        " ", h("button", { type: "button", class: "secondary", onclick: () => clear(area) }, "Cancel"));
      e.target.append(confirmBox);
      confirmBox.querySelector("button").focus();
    } }, h("label", {}, "Corrected text", text),
    h("div", { class: "row" }, h("button", { type: "submit", testid: "correct-save" }, "Save correction"),
      h("button", { type: "button", class: "secondary", onclick: () => clear(area) }, "Cancel"))));
    text.focus();
  };
  return [h("div", { class: "row" },
    h("button", { type: "button", class: "secondary", testid: "correct-button", onclick: correct }, "Correct…"),
    h("button", { type: "button", class: "secondary", testid: "forget-button", onclick: forget }, "Forget…")), area];
}

// An entity's typed facts and when each held, from the user's graph (GET /v1/graph).
async function entityFacts(ctx, name) {
  const s = ctx.state;
  const g = await api(`/v1/graph/${encodeURIComponent(s.app_name)}/${encodeURIComponent(s.user_id)}`,
    { query: { entity: name, depth: 1 } });
  const names = new Map([[g.entity.entity_id, g.entity.name], ...g.neighbours.map((n) => [n.node_id, n.name])]);
  const day = (t) => (t ? fmtTime(t).slice(0, 10) : "?");
  const facts = g.facts.filter((f) => f.type !== "mentions" && f.type !== "same_entity");
  const aliases = g.entity.aliases.filter((a) => a !== g.entity.name);
  return h("div", { class: "panel", testid: "entity-facts" },
    h("strong", {}, `${g.entity.name} (${g.entity.type})`), aliases.length ? ` also ${aliases.join(", ")}` : "",
    facts.length ? h("ul", {}, facts.map((f) => h("li", { title: f.evidence },
      `${names.get(f.src) || f.src} ${f.type} ${names.get(f.dst) || f.dst}: from ${day(f.valid_from)}`,
      f.valid_to ? ` to ${day(f.valid_to)}` : "", f.ended_by ? h("span", { class: "bad" }, " (no longer holds)") : h("span", { class: "ok" }, " (holds)"))))
      : h("p", { class: "muted" }, "No typed facts about it in the graph."));
}

function entities(ctx, m) {
  if (!(m.entities || []).length) return null;
  const box = h("div", {});
  return [h("div", { class: "chips" }, h("span", { class: "chips-label" }, "Entities:"),
    m.entities.map((name) => h("button", { type: "button", class: "chip chip-button", testid: "entity-button",
      "aria-label": `Facts about ${name}`, onclick: async () => {
        clear(box, loading());
        try { clear(box, await entityFacts(ctx, name)); } catch (err) { clear(box, h("p", { class: "error" }, err.message)); }
      } }, name))), box];
}

function validity(m) {
  const end = m.event_time_end && m.event_time_end !== m.event_time_start ? ` – ${fmtTime(m.event_time_end)}` : "";
  const when = m.event_time_start ? fmtTime(m.event_time_start) + end : null;
  return facts([["Happened", when], ["Stored", fmtTime(m.created_at)],
    ["Expires", m.expires_at ? fmtTime(m.expires_at) : null],
    ["Edited", m.edited_at ? `${fmtTime(m.edited_at)} by ${m.edited_by || "?"}` : null],
    ["Agent", m.agent_name || null]]);
}

function card(ctx, m) {
  const status = h("p", { role: "status", class: "ok" });
  const el = h("article", { class: "card", testid: "memory-card", "data-memory-id": m.memory_id },
    h("div", { class: "meta" }, h("span", { class: "chip" }, m.kind), " ", h("code", {}, m.memory_id)),
    h("p", { class: "text", testid: "memory-text" }, m.text),
    validity(m),
    chips("Topics", m.topics), chips("Key facts", m.key_facts, "chip fact"),
    entities(ctx, m), chips("Decisions", m.decisions),
    chips("Commitments", m.commitments), chips("Open threads", m.open_threads),
    (m.previous_versions || []).length ? h("details", {}, h("summary", {}, `${m.previous_versions.length} earlier version(s)`),
      h("ol", {}, m.previous_versions.map((v) => h("li", {}, `${fmtTime(v.written_at)} ${v.written_by}: `, v.text)))) : null,
    status);
  const [provRow, sourceBox] = provenance(ctx, m);
  const [actionRow, actionArea] = actions(ctx, m, el, status);
  provRow.append(actionRow);
  el.append(provRow, sourceBox, actionArea);
  return el;
}

export async function render(ctx, main) {
  const s = ctx.state;
  main.append(h("h2", {}, `Memories of ${s.user_id} in ${s.app_name}`), loading());
  const [sessions, all] = await Promise.all([
    api("/v1/sessions", { query: { app_name: s.app_name, user_id: s.user_id } }).then((r) => r.sessions).catch(() => []),
    loadAll(s)]);
  if (ctx.stale()) return;
  const list = h("div", { testid: "memory-list" });
  let shown = 0;
  const more = h("button", { type: "button", class: "secondary", testid: "show-more", onclick: () => showMore() }, "Show more");
  const showMore = () => {
    all.memories.slice(shown, shown + SHOWN_STEP).forEach((m) => list.append(card(ctx, m)));
    shown = Math.min(all.memories.length, shown + SHOWN_STEP);
    more.hidden = shown >= all.memories.length;
  };
  const times = all.memories.map(eventTime).filter((t) => typeof t === "number");
  clear(main, h("h2", {}, `Memories of ${s.user_id} in ${s.app_name}`),
    filterForm(ctx, sessions),
    h("p", { class: "muted", testid: "memory-count" }, `${all.memories.length}${all.truncated ? "+" : ""} memories`,
      all.truncated ? ` (the first ${MAX_ROWS} shown and plotted)` : ""),
    h("figure", {}, timeHistogram(times, { width: 1240, height: 120, label: `Memories of ${s.user_id} over time (event time)`, testid: "memories-plot" }),
      h("figcaption", { class: "muted" }, "Memories over time (when the remembered events happened, else when stored)")),
    all.memories.length ? list : h("p", { testid: "no-memories" }, "No memories match."), more);
  showMore();
}
