// Store health (GET /v1/store): shards, segments, rows per kind, the model, bytes on
// disk, the last runs with their throughput and stage times, and what doctor reports.

import { api } from "../api.js";
import { clear, facts, fmtNum, fmtTime, h, loading } from "../dom.js";
import { hbars } from "../plots.js";

const RUN_COLUMNS = ["run_id", "kind", "status", "started_at", "finished_at"];

function mib(n) { return `${(n / 1048576).toFixed(2)} MiB`; }

function runRow(run) {
  const took = run.started_at && run.finished_at ? `${fmtNum(run.finished_at - run.started_at, 1)} s` : "";
  const extras = Object.entries(run).filter(([k, v]) => !RUN_COLUMNS.includes(k) && v !== null
    && (typeof v === "number" || typeof v === "string" || typeof v === "boolean"));
  const stages = Object.entries(run).filter(([, v]) => v && typeof v === "object" && !Array.isArray(v)
    && Object.values(v).length && Object.values(v).every((x) => typeof x === "number"));
  return h("tr", { testid: "run-row" }, h("td", {}, h("code", {}, run.run_id || "")), h("td", {}, run.kind || ""),
    h("td", { class: run.status === "failed" ? "bad" : "" }, run.status || ""),
    h("td", {}, fmtTime(run.started_at)), h("td", { class: "num" }, took),
    h("td", {}, extras.map(([k, v]) => h("div", {}, `${k}: ${fmtNum(v, 2)}`))),
    h("td", {}, stages.map(([k, v]) => h("div", {}, h("div", { class: "muted" }, k),
      hbars(Object.entries(v).map(([label, value]) => ({ label, value })), { label: `${run.run_id} ${k}`,
        width: 380, fmt: (x) => fmtNum(x, 2) })))));
}

export async function render(ctx, main) {
  main.append(loading());
  const res = await api("/v1/store");
  if (ctx.stale()) return;
  const st = res.stats || {};
  const doctor = res.doctor || { healthy: true, problems: [] };
  const kinds = Object.entries(st.kinds || {}).map(([label, value]) => ({ label, value }));
  const apps = Object.entries(st.apps || {}).map(([label, value]) => ({ label, value }));
  const bytes = st.bytes || {};
  clear(main, h("h2", {}, "Store health"),
    h("p", { testid: "doctor", class: doctor.healthy ? "ok" : "bad" },
      doctor.healthy ? "doctor: healthy, no problems found." : `doctor: ${doctor.problems.length} problem(s)`),
    doctor.problems?.length ? h("ul", { testid: "doctor-problems" }, doctor.problems.map((p) => h("li", {}, p))) : null,
    h("div", { class: "grid2" },
      h("section", { class: "panel", testid: "store-stats" }, h("h3", {}, "Store"),
        facts([["Backend", st.backend], ["Memories (live)", fmtNum(st.memories)], ["Users", fmtNum(st.users)],
          ["Shards", fmtNum(st.shards)], ["Segments", fmtNum(st.segments)], ["Rows stored", fmtNum(st.rows_stored)],
          ["Manifest version", fmtNum(st.manifest_version)], ["Embedding model", st.embedding_model || "none (keyword only)"],
          ["Dimension", fmtNum(st.dim)], ["Summarizer", st.summarizer], ["On disk", bytes.total !== undefined ? mib(bytes.total) : null]])),
      h("section", { class: "panel" }, h("h3", {}, "Rows per kind"),
        kinds.length ? hbars(kinds, { label: "live memories per kind", testid: "kinds-plot", width: 540 }) : h("p", { class: "muted" }, "No memories."),
        h("h3", {}, "Memories per app"),
        apps.length ? hbars(apps, { label: "live memories per app", width: 540 }) : h("p", { class: "muted" }, "None."))),
    h("h3", {}, "Last runs"),
    (res.runs || []).length ? h("table", { testid: "runs" }, h("thead", {}, h("tr", {},
      ["Run", "Kind", "Status", "Started", "Took", "Figures", "Stage seconds"].map((t) => h("th", {}, t)))),
    h("tbody", {}, res.runs.map(runRow))) : h("p", { class: "muted", testid: "runs" }, "No batch runs recorded in this store."));
}
