// Store health (GET /v1/store): shards, segments, rows per kind, the model, bytes on
// disk, the last runs with their throughput and stage times, and what doctor reports.

import { api } from "../api.js";
import { clear, facts, fmtNum, fmtTime, h, loading } from "../dom.js";
import { hbars } from "../plots.js";

function mib(n) { return `${(n / 1048576).toFixed(2)} MiB`; }

const pairs = (obj) => Object.entries(obj || {}).map(([k, v]) => `${k} ${fmtNum(v, 2)}`).join(", ");

// One run report (mnemoray.memory.runs, as GET /v1/store gives it): its figures as text,
// its busy seconds per stage as a plot.
function runRow(run) {
  const took = run.seconds ?? (run.started_at && run.finished_at ? run.finished_at - run.started_at : null);
  const stages = Object.entries(run.stage_seconds || {}).map(([label, value]) => ({ label, value }));
  return h("tr", { testid: "run-row" }, h("td", {}, h("code", {}, run.run_id || "")), h("td", {}, run.kind || ""),
    h("td", { class: run.status === "failed" ? "bad" : "" }, run.status || ""),
    h("td", {}, fmtTime(run.started_at)), h("td", { class: "num" }, took === null ? "" : `${fmtNum(took, 1)} s`),
    h("td", {}, run.throughput ? h("div", {}, `per second: ${pairs(run.throughput)}`) : null,
      run.counts ? h("div", { class: "muted" }, pairs(run.counts)) : null),
    h("td", {}, stages.length ? hbars(stages, { label: `busy seconds per stage of run ${run.run_id}`,
      width: 380, unit: " s", fmt: (x) => fmtNum(x, 2) }) : ""));
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
      doctor.checked === false ? `doctor: not run (${doctor.note || "it reads Parquet stores only"}).`
        : doctor.healthy ? "doctor: healthy, no problems found." : `doctor: ${doctor.problems.length} problem(s)`),
    doctor.problems?.length ? h("ul", { testid: "doctor-problems" }, doctor.problems.map((p) => h("li", {}, p))) : null,
    st.partial ? h("p", { class: "bad", testid: "partial-stats" },
      `The figures below leave out damaged shard(s) ${(st.damaged_shards || []).join(", ")}.`) : null,
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
      ["Run", "Kind", "Status", "Started", "Took", "Throughput and counts", "Busy seconds per stage"].map((t) => h("th", {}, t)))),
    h("tbody", {}, res.runs.map(runRow))) : h("p", { class: "muted", testid: "runs" }, "No batch runs recorded in this store."));
}
