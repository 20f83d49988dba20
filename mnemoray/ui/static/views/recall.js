// Recall playground: a query, a mode and top_k; the ranked results with each signal's
// value and rank side by side, the axes that found them, and (explain=true) what each
// signal added to the fused score, as a bar per result and a plot of the chosen one.

import { api } from "../api.js";
import { clear, fmtNum, fmtTime, h, loading, short } from "../dom.js";
import { PALETTE, hbars, stackBar } from "../plots.js";

const MODES = ["", "hybrid", "dense", "keyword"];

function signalNames(results) {
  const names = new Set();
  for (const r of results) for (const k of Object.keys(r.signals || {})) if (!k.endsWith("_rank")) names.add(k);
  return [...names].sort();
}

function colorOf(names) {
  const map = {};
  names.forEach((n, i) => { map[n] = PALETTE[i % PALETTE.length]; });
  return map;
}

function contributionParts(r, colors) {
  return Object.entries(r.contributions || {}).map(([label, value]) =>
    ({ label, value, color: colors[label] }));
}

function breakdown(r, colors) {
  const parts = contributionParts(r, colors).sort((a, b) => Math.abs(b.value) - Math.abs(a.value));
  const sum = parts.reduce((a, p) => a + p.value, 0);
  return h("figure", { testid: "score-breakdown" },
    h("h3", {}, `How the fused score of “${short(r.text, 60)}” came out`),
    parts.length ? hbars(parts, { label: "what each signal added to the fused score",
      fmt: (v) => (v >= 0 ? "+" : "") + v.toFixed(4), testid: "contribution-plot" })
      : h("p", { class: "muted" }, "No contributions: this server does not explain recall (explain=true)."),
    h("figcaption", { class: "muted" },
      parts.length ? `score ${fmtNum(r.score, 4)} = 1 + Σ contributions (${fmtNum(sum, 4)})` : ""));
}

function resultsTable(results, names, colors, onExplain) {
  // One scale for every row's bar: lengths compare across results.
  const widest = Math.max(1e-9, ...results.map((r) =>
    Object.values(r.contributions || {}).reduce((a, v) => a + Math.max(0, v), 0)));
  return h("table", { testid: "recall-results" },
    h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "Memory"), h("th", { class: "num" }, "Score"),
      h("th", {}, "Contributions"),
      names.map((n) => h("th", { class: "num", testid: `signal-col-${n}`, scope: "col" }, n, h("br"),
        h("span", { class: "muted" }, "value · rank"))),
      h("th", {}, "Axes"))),
    h("tbody", {}, results.map((r, i) => h("tr", { testid: "recall-row", "data-memory-id": r.memory_id },
      h("td", { class: "num" }, String(i + 1)),
      h("td", {}, r.text.length > 220 ? h("details", {}, h("summary", {}, short(r.text, 200)), h("div", { class: "text" }, r.text))
        : h("div", {}, r.text),
        h("div", { class: "meta muted" }, `${r.kind}${r.date ? " · " + r.date.slice(0, 10) : ""} · session ${r.provenance?.session_id ?? ""}`),
        (r.facts || []).map((f) => h("span", { class: f.holds ? "chip fact" : "chip" },
          `${f.subject} ${f.relation} ${f.object}`, f.valid_from ? ` from ${f.valid_from.slice(0, 10)}` : "",
          f.valid_to ? ` to ${f.valid_to.slice(0, 10)}` : "", f.holds ? " (holds)" : " (no longer holds)"))),
      h("td", { class: "num" }, fmtNum(r.score, 4)),
      h("td", {}, r.contributions ? stackBar(contributionParts(r, colors), { label: `contributions to result ${i + 1}`, total: widest }) : "",
        " ", h("button", { type: "button", class: "link", testid: "explain-button",
          "aria-label": `Plot the score breakdown of result ${i + 1}`, onclick: () => onExplain(r) }, "plot")),
      names.map((n) => {
        const v = r.signals?.[n], rank = r.signals?.[`${n}_rank`];
        return h("td", { class: "num nowrap", testid: `signal-${n}` }, v === undefined ? "–" : fmtNum(v, 4),
          rank ? h("span", { class: "muted" }, ` · #${rank}`) : "");
      }),
      h("td", {}, (r.axes || []).join(", "))))));
}

function legend(colors) {
  return h("div", {}, h("h3", {}, "Reading the table"),
    h("p", {}, "Each signal column gives the raw value and the rank (#1 = best) among the candidates; ",
      "“Contributions” splits what each signal added to the fused score (score = 1 + their sum); ",
      "“plot” draws a row's breakdown."),
    h("p", { class: "chips" }, h("span", { class: "chips-label" }, "Colours:"),
    Object.entries(colors).map(([n, c]) => h("span", { class: "chip" },
      h("span", { class: "swatch", style: `background:${c}` }), n))));
}

export async function render(ctx, main) {
  const s = ctx.state;
  const query = h("input", { type: "search", name: "q", required: true, value: s.q || "", size: 48,
    testid: "recall-query", "aria-label": "Query" });
  const mode = h("select", { name: "mode", testid: "recall-mode" },
    MODES.map((m) => h("option", { value: m, selected: (s.mode || "") === m }, m || "server default")));
  const topK = h("input", { type: "number", name: "top_k", min: 1, max: 100, value: s.top_k || 10,
    testid: "recall-topk" });
  const out = h("div", { testid: "recall-output" });
  const form = h("form", { class: "inline", testid: "recall-form", "aria-label": "Recall",
    onsubmit: (e) => { e.preventDefault(); run(); } },
  h("label", {}, "Query", query), h("label", {}, "Mode", mode), h("label", {}, "Top k", topK),
  h("button", { type: "submit", testid: "recall-submit" }, "Recall"));
  main.append(h("h2", {}, `Recall for ${s.user_id} in ${s.app_name}`), form, out);

  async function run() {
    if (!query.value.trim()) return;
    ctx.remember({ q: query.value, mode: mode.value, top_k: topK.value === "10" ? null : topK.value });
    clear(out, loading("Recalling…"));
    main.dataset.ready = "";
    try {
      const body = { app_name: s.app_name, user_id: s.user_id, query: query.value,
        top_k: Number(topK.value) || 10, mode: mode.value || null, explain: true };
      const res = await api("/v1/recall", { method: "POST", body }).catch((err) => {
        // A server older than explain=true refuses the field: recall without the breakdown.
        if (err.status !== 422 || !String(err.field || "").endsWith("explain")) throw err;
        delete body.explain;
        return api("/v1/recall", { method: "POST", body });
      });
      const results = res.memories || [];
      const names = signalNames(results);
      const colors = colorOf([...new Set([...names, ...results.flatMap((r) => Object.keys(r.contributions || {}))])]);
      const detail = h("div", {});
      const explain = (r) => clear(detail, breakdown(r, colors));
      clear(out, h("p", { class: "muted", testid: "recall-summary" },
        `${results.length} result(s) in ${fmtNum(res.took_ms, 1)} ms (store version ${res.store_version}, ${fmtTime(Date.now() / 1000)})`),
      results.length ? [h("div", { class: "grid2" }, detail, legend(colors)), resultsTable(results, names, colors, explain)]
        : h("p", { testid: "no-results" }, "Nothing recalled."));
      if (results.length) explain(results[0]);
      main.dataset.ready = "recall";
    } catch (err) {
      clear(out, h("p", { class: "error", role: "alert" }, err.message));
      main.dataset.ready = "error";
    }
  }
  if (s.q) await run();
  else query.focus();
}
