// Compile: a session and an agent -> the compiled request section by section, each
// processor's tokens and time (plots), what the token budget dropped, and the
// static prefix's hash at each of the last user turns (compiled with at_event_id).

import { api } from "../api.js";
import { clear, facts, fmtNum, h, loading, short } from "../dom.js";
import { hbars } from "../plots.js";

const MAX_TURNS = 12;
// The compiler's tools are opt-in (memory_tools); the inspector's agent takes both so the
// page shows the tools and the artifact listing that comes with load_artifacts.
const TOOLS = ["load_memory", "load_artifacts"];
const DEFAULT_AGENT = { name: "inspector", static_instruction: "You are a helpful assistant with a long-term memory of this user.",
  instruction: "Answer briefly. Use the recalled memories when they help.", token_budget: 4000, memory_preload: true,
  memory_tools: TOOLS };
const MEMORY_RE = /<memory>[\s\S]*?<\/memory>/;
const ARTIFACTS_RE = /Artifacts available to you[^\n]*(\n- [^\n]*)*/;

// The system instruction cut into the parts the processors wrote (mnemoray.compiler).
export function systemSections(system, staticInstruction) {
  const out = [];
  let rest = system;
  if (staticInstruction && rest.startsWith(staticInstruction)) {
    out.push(["Static prefix (cacheable)", staticInstruction]);
    rest = rest.slice(staticInstruction.length);
  }
  const pick = (re, label) => {
    const m = rest.match(re);
    if (!m) return;
    out.push([label, m[0]]);
    rest = rest.replace(m[0], "");
  };
  pick(MEMORY_RE, "Memory block");
  pick(ARTIFACTS_RE, "Artifacts listing");
  if (rest.trim()) out.splice(staticInstruction ? 1 : 0, 0, ["Instruction", rest.trim()]);
  return out;
}

function partText(p) {
  if (p.text !== undefined && p.text !== null) return p.text;
  if (p.function_call) return `call ${p.function_call.name}(${JSON.stringify(p.function_call.args)})`;
  if (p.function_response) return `result of ${p.function_response.name}: ${JSON.stringify(p.function_response.response)}`;
  return "";
}

function contentsTable(contents) {
  return h("table", { testid: "compiled-contents" },
    h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "Role"), h("th", {}, "Kind"),
      h("th", { class: "num" }, "Tokens"), h("th", {}, "Text"))),
    h("tbody", {}, contents.map((c, i) => {
      const text = c.parts.map(partText).join("\n");
      const kind = MEMORY_RE.test(text) ? "memory block" : c.event_ids.length ? `history (${c.event_ids.length} event(s))` : "this call only";
      return h("tr", {}, h("td", { class: "num" }, String(i + 1)), h("td", {}, c.role), h("td", {}, kind),
        h("td", { class: "num" }, String(c.tokens)),
        h("td", {}, text.length > 240 ? h("details", {}, h("summary", {}, short(text, 200)), h("pre", {}, text)) : text));
    })));
}

function dropped(trace) {
  const rows = [];
  for (const step of trace) {
    const d = step.detail || {};
    if (step.name === "token_budget" && d.budget !== undefined) {
      const after = d.tokens_after !== undefined ? `, ${d.tokens_after} after` : "";
      rows.push(["Token budget",
        `${d.budget} tokens; ${d.tokens_before} before${after}; dropped ${d.dropped_contents || 0} content(s)`]);
      if ((d.dropped_event_ids || []).length) rows.push(["Dropped events", d.dropped_event_ids.join(", ")]);
      if (d.reason) rows.push(["Over budget", `${d.over_budget_by} tokens: ${d.reason}`]);
    }
    if (step.name === "tool_results" && d.dropped_results) {
      rows.push(["Old tool results dropped", `${d.dropped_results} (window ${d.window}): ${(d.dropped_event_ids || []).join(", ")}`]);
    }
    if (step.name === "history") {
      if (d.covered_by_compaction) rows.push(["Covered by compaction", `${d.covered_by_compaction} raw event(s) shown as their summary`]);
      const skipped = Object.entries(d.skipped || {}).filter(([, n]) => n);
      if (skipped.length) rows.push(["History skipped", skipped.map(([k, n]) => `${k}: ${n}`).join(", ")]);
    }
    if (step.error) rows.push([`${step.name} failed`, `${step.error.error}: ${step.error.message}`]);
  }
  return rows.length ? facts(rows, "budget-dropped") : h("p", { class: "muted", testid: "budget-dropped" }, "Nothing was dropped.");
}

function tracePlots(trace) {
  return h("div", { class: "grid2", testid: "trace" },
    h("figure", {}, h("div", { class: "section-label" }, "Tokens added per processor"),
      hbars(trace.map((t) => ({ label: t.name, value: t.tokens_added })), { label: "tokens added per processor", testid: "trace-tokens", width: 560 })),
    h("figure", {}, h("div", { class: "section-label" }, "Time per processor"),
      hbars(trace.map((t) => ({ label: t.name, value: t.micros / 1000 })), { label: "milliseconds per processor", unit: " ms",
        fmt: (v) => v.toFixed(3), testid: "trace-time", color: "#b35900", width: 560 })));
}

async function prefixAcrossTurns(ctx, sessionId, agent, box) {
  const s = ctx.state;
  clear(box, loading("Compiling at each user turn…"));
  const sess = await api(`/v1/sessions/${encodeURIComponent(sessionId)}`, { query: { app_name: s.app_name, user_id: s.user_id } });
  const turns = sess.events.filter((e) => e.role === "user" && e.type === "message" && !e.partial).slice(-MAX_TURNS);
  const rows = [];
  for (const e of turns) {
    const out = await api("/v1/context:compile", { method: "POST", body: {
      app_name: s.app_name, user_id: s.user_id, session_id: sessionId, agent, at_event_id: e.id } });
    rows.push({ e, out });
    if (ctx.stale()) return;
  }
  const stable = rows.every((r) => r.out.prefix_hash === rows[0].out.prefix_hash);
  clear(box, h("p", { testid: "prefix-verdict", class: stable ? "ok" : "bad" }, stable
    ? `The static prefix hash is the same at all ${rows.length} turn(s): a prefix cache can reuse it.`
    : "The static prefix hash changed between turns: a prefix cache misses there."),
  h("table", { testid: "prefix-turns" }, h("thead", {}, h("tr", {}, ["Turn", "User message", "Prefix hash", "System hash",
    "Total tokens", "Cacheable prefix", "Prefix same as previous"].map((t) => h("th", {}, t)))),
  h("tbody", {}, rows.map((r, i) => h("tr", {}, h("td", { class: "num" }, String(turns.length - rows.length + i + 1)),
    h("td", {}, short(r.e.text, 70)), h("td", {}, h("code", {}, r.out.prefix_hash.slice(0, 12))),
    h("td", {}, h("code", {}, (r.out.system_hash || "").slice(0, 12))),
    h("td", { class: "num" }, String(r.out.total_tokens)), h("td", { class: "num" }, String(r.out.cacheable_prefix_tokens ?? "")),
    h("td", {}, i === 0 ? "–" : r.out.prefix_hash === rows[i - 1].out.prefix_hash ? "yes" : h("span", { class: "bad" }, "no")))))));
}

function agentForm(ctx, sessions, onCompile) {
  const s = ctx.state;
  const session = h("select", { name: "session_id", testid: "compile-session", required: true },
    sessions.map((x) => h("option", { value: x.session_id, selected: x.session_id === s.session_id }, x.session_id)));
  if (s.session_id && !sessions.some((x) => x.session_id === s.session_id)) {
    session.append(h("option", { value: s.session_id, selected: true }, s.session_id));
  }
  const f = {
    name: h("input", { name: "name", value: DEFAULT_AGENT.name, required: true, testid: "agent-name" }),
    static_instruction: h("textarea", { name: "static_instruction", rows: 1 }, DEFAULT_AGENT.static_instruction),
    instruction: h("textarea", { name: "instruction", rows: 1, testid: "agent-instruction" }, DEFAULT_AGENT.instruction),
    token_budget: h("input", { type: "number", name: "token_budget", min: 1, value: DEFAULT_AGENT.token_budget, testid: "agent-budget" }),
    memory_preload: h("input", { type: "checkbox", name: "memory_preload", checked: DEFAULT_AGENT.memory_preload, testid: "agent-preload" }),
    new_message: h("input", { name: "new_message", size: 40, testid: "compile-message" }),
  };
  const tools = TOOLS.map((t) => h("input", { type: "checkbox", name: t, checked: DEFAULT_AGENT.memory_tools.includes(t), testid: `agent-tool-${t}` }));
  const agent = () => ({ name: f.name.value, static_instruction: f.static_instruction.value,
    instruction: f.instruction.value, token_budget: f.token_budget.value ? Number(f.token_budget.value) : null,
    memory_preload: f.memory_preload.checked, memory_tools: TOOLS.filter((t, i) => tools[i].checked) });
  return h("form", { testid: "compile-form", "aria-label": "Compile", onsubmit: (e) => {
    e.preventDefault();
    onCompile(session.value, agent(), f.new_message.value || null);
  } },
  h("div", { class: "row" }, h("label", {}, "Session", session), h("label", {}, "Agent name", f.name),
    h("label", {}, "Token budget", f.token_budget), h("label", { class: "check" }, f.memory_preload, "Preload memories"),
    ...TOOLS.map((t, i) => h("label", { class: "check" }, tools[i], `Offer ${t}`)),
    h("label", {}, "New message (optional)", f.new_message)),
  h("div", { class: "grid2" }, h("label", {}, "Static instruction (the static prefix)", f.static_instruction),
    h("label", {}, "Instruction (may use {state} keys)", f.instruction)),
  h("p", {}, h("button", { type: "submit", testid: "compile-submit" }, "Compile")));
}

// The trace's last entry (mnemoray.compiler: cacheable_prefix) in words: what a prefix
// cache can reuse next call and the first part made for this call only, which ends it.
export function prefixSummary(trace) {
  const d = (trace.find((t) => t.name === "cacheable_prefix") || {}).detail;
  if (!d) return "";
  const e = d.ends_before;
  const end = !e ? "nothing in the request is made for this call only"
    : e.part === "new_message" ? `it ends before the new message (content ${e.index + 1})`
      : e.part === "system_block" ? `it ends before system instruction block ${e.index + 1}, added by ${e.step || "?"}`
        : `it ends before content ${e.index + 1}, added by ${e.step || "?"}`;
  return `A prefix cache can reuse ${d.tokens} tokens: the tool declarations, the first ${d.system_blocks} ` +
    `system instruction block(s) and the first ${d.contents} content(s); ${end}.`;
}

function stat(label, value, testid) {
  return h("div", { class: "stat", testid }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
}

// The answer, most telling first: totals, the trace, drops, the prefix across turns
// (`turns`, filled afterwards), then the request itself section by section.
function compiled(out, agent, turns) {
  return [
    h("div", { class: "stats", testid: "compile-summary" },
      stat("total tokens", String(out.total_tokens)), stat("static prefix tokens", String(out.static_prefix_tokens)),
      stat("cacheable prefix tokens", String(out.cacheable_prefix_tokens ?? "")),
      stat("contents", String(out.contents.length)), stat("tools", (out.tools || []).map((t) => t.name).join(", ") || "none"),
      stat("compiled in", `${fmtNum(out.took_ms, 1)} ms`),
      stat("prefix hash", h("code", { testid: "prefix-hash", title: out.prefix_hash }, out.prefix_hash.slice(0, 16)))),
    h("p", { testid: "prefix-summary" }, prefixSummary(out.trace)),
    (out.degraded || []).length ? h("p", { class: "bad" }, "Degraded: ",
      out.degraded.map((d) => `${d.step}: ${d.message}`).join("; ")) : null,
    tracePlots(out.trace),
    h("h3", {}, "What the budget dropped"), dropped(out.trace),
    h("h3", {}, "Static prefix hash across turns"), turns,
    h("h3", {}, "System instruction, section by section"),
    h("div", { testid: "compiled-sections" }, systemSections(out.system_instruction, agent.static_instruction).map(([label, text]) =>
      h("section", { "data-section": label }, h("div", { class: "section-label" }, label), h("pre", {}, text)))),
    h("h3", {}, `Contents (${out.contents.length})`), contentsTable(out.contents),
  ];
}

export async function render(ctx, main) {
  const s = ctx.state;
  main.append(loading());
  const sessions = (await api("/v1/sessions", { query: { app_name: s.app_name, user_id: s.user_id } })).sessions || [];
  if (ctx.stale()) return;
  const out = h("div", { testid: "compile-output" });
  const turns = h("div", { testid: "prefix-across-turns" });
  const run = async (sessionId, agent, message) => {
    ctx.remember({ session_id: sessionId });
    main.dataset.ready = "";
    clear(out, loading("Compiling…"));
    try {
      const res = await api("/v1/context:compile", { method: "POST", body: {
        app_name: s.app_name, user_id: s.user_id, session_id: sessionId, agent, new_message: message } });
      clear(out, compiled(res, agent, turns));
      main.dataset.ready = "compile";
      await prefixAcrossTurns(ctx, sessionId, agent, turns).catch((err) => clear(turns, h("p", { class: "error" }, err.message)));
    } catch (err) {
      clear(out, h("p", { class: "error", role: "alert" }, err.message));
      main.dataset.ready = "error";
    }
  };
  clear(main, h("h2", {}, `Compile a context for ${s.user_id} in ${s.app_name}`),
    sessions.length || s.session_id ? agentForm(ctx, sessions, run) : h("p", {}, "This user has no sessions to compile."),
    out);
  if (s.session_id) await run(s.session_id, DEFAULT_AGENT, null);
}
