// Inline-SVG plots (no library): horizontal bars, a stacked bar and a histogram over time.
// Every plot has a <title> and an aria-label; the numbers are also printed as text.

const NS = "http://www.w3.org/2000/svg";
export const PALETTE = ["#1f5fa8", "#b35900", "#2e7d32", "#8e24aa", "#c62828", "#00796b",
  "#5d4037", "#455a64"];

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const c of children) if (c !== null && c !== undefined) el.append(c);
  return el;
}

function text(x, y, s, attrs = {}) {
  const t = svg("text", { x, y, ...attrs });
  t.textContent = s;
  return t;
}

function root(width, height, label, testid) {
  const el = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": label, class: "plot" });
  if (testid) el.dataset.testid = testid;
  const title = svg("title");
  title.textContent = label;
  el.append(title);
  return el;
}

// items: [{label, value}] -> one labelled bar each, the value printed after it.
export function hbars(items, { label = "bar plot", unit = "", width = 520, testid,
  color = PALETTE[0], fmt = (v) => String(v) } = {}) {
  const row = 22, labelW = 170, valueW = 90;
  const height = Math.max(row, items.length * row) + 6;
  const el = root(width, height, label, testid);
  const max = Math.max(1e-12, ...items.map((i) => Math.abs(i.value)));
  const span = width - labelW - valueW;
  items.forEach((item, i) => {
    const y = i * row + 4;
    const w = Math.max(item.value ? 1 : 0, (Math.abs(item.value) / max) * span);
    el.append(text(labelW - 6, y + 14, item.label, { "text-anchor": "end", class: "plot-label" }));
    const bar = svg("rect", { x: labelW, y, width: w.toFixed(1), height: row - 6,
      fill: item.color || (item.value < 0 ? PALETTE[4] : color), rx: 2 });
    const t = svg("title");
    t.textContent = `${item.label}: ${fmt(item.value)}${unit}`;
    bar.append(t);
    el.append(bar, text(labelW + w + 6, y + 14, fmt(item.value) + unit, { class: "plot-value" }));
  });
  return el;
}

// parts: [{label, value}] -> one bar split by part (e.g. what each signal added).
export function stackBar(parts, { width = 220, height = 16, label = "stacked bar", testid,
  total } = {}) {
  const el = root(width, height, label, testid);
  const sum = total || parts.reduce((a, p) => a + Math.max(0, p.value), 0) || 1;
  let x = 0;
  parts.forEach((p, i) => {
    const w = (Math.max(0, p.value) / sum) * width;
    const r = svg("rect", { x: x.toFixed(1), y: 0, width: w.toFixed(1), height,
      fill: p.color || PALETTE[i % PALETTE.length] });
    const t = svg("title");
    t.textContent = `${p.label}: ${p.value.toFixed(4)}`;
    r.append(t);
    el.append(r);
    x += w;
  });
  return el;
}

function bucketOf(spanSeconds) {
  const day = 86400;
  if (spanSeconds <= 2 * day) return 3600;
  if (spanSeconds <= 90 * day) return day;
  if (spanSeconds <= 3 * 365 * day) return 7 * day;
  return 30 * day;
}

function fmtDay(seconds, bucket) {
  const iso = new Date(seconds * 1000).toISOString();
  return bucket < 86400 ? iso.slice(0, 13).replace("T", " ") + "h" : iso.slice(0, 10);
}

// times: epoch seconds -> counts per hour/day/week/month, whichever fits the span.
export function timeHistogram(times, { width = 760, height = 160, label = "count over time",
  testid } = {}) {
  const el = root(width, height, label, testid);
  if (!times.length) {
    el.append(text(10, 20, "nothing to plot", { class: "plot-label" }));
    return el;
  }
  const lo = Math.min(...times), hi = Math.max(...times);
  const bucket = bucketOf(hi - lo);
  const first = Math.floor(lo / bucket);
  const n = Math.floor(hi / bucket) - first + 1;
  const counts = new Array(n).fill(0);
  for (const t of times) counts[Math.floor(t / bucket) - first] += 1;
  const max = Math.max(...counts);
  const left = 40, bottom = 28, top = 8, plotW = width - left - 10, plotH = height - bottom - top;
  const bw = plotW / n;
  el.append(svg("line", { x1: left, y1: top + plotH, x2: left + plotW, y2: top + plotH,
    stroke: "#333" }));
  el.append(text(left - 6, top + 10, String(max), { "text-anchor": "end", class: "plot-label" }));
  el.append(text(left - 6, top + plotH, "0", { "text-anchor": "end", class: "plot-label" }));
  counts.forEach((c, i) => {
    if (!c) return;
    const bh = (c / max) * plotH;
    const r = svg("rect", { x: (left + i * bw + 0.5).toFixed(1), y: (top + plotH - bh).toFixed(1),
      width: Math.max(1, bw - 1).toFixed(1), height: bh.toFixed(1), fill: PALETTE[0] });
    const t = svg("title");
    t.textContent = `${fmtDay((first + i) * bucket, bucket)}: ${c}`;
    r.append(t);
    el.append(r);
  });
  el.append(text(left, height - 8, fmtDay(first * bucket, bucket), { class: "plot-label" }));
  el.append(text(left + plotW, height - 8, fmtDay((first + n - 1) * bucket, bucket),
    { "text-anchor": "end", class: "plot-label" }));
  const unit = { 3600: "hour", 86400: "day", 604800: "week" }[bucket] || "month";
  el.append(text(left + plotW / 2, height - 8, `per ${unit}`, { "text-anchor": "middle",
    class: "plot-label" }));
  return el;
}
