// Small DOM helpers shared by the views: element building (text only, never HTML
// strings from data), times, chips and the one-line error.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "testid") el.dataset.testid = v;
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    // Through the CSSOM: the page's Content-Security-Policy refuses style attributes.
    else if (k === "style") el.style.cssText = String(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function fmtTime(seconds) {
  if (seconds === null || seconds === undefined || seconds === "") return "";
  const d = new Date(Number(seconds) * 1000);
  if (Number.isNaN(d.getTime())) return String(seconds);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function fmtNum(x, digits = 3) {
  if (x === null || x === undefined) return "";
  if (typeof x !== "number") return String(x);
  return Number.isInteger(x) ? String(x) : x.toFixed(digits);
}

export function chips(label, items, cls = "chip") {
  if (!items || !items.length) return null;
  return h("div", { class: "chips" }, h("span", { class: "chips-label" }, label + ":"),
    items.map((t) => h("span", { class: cls }, t)));
}

export function short(text, n = 160) {
  const s = String(text ?? "");
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

// One readable line for a failed call; `where` is the error element of a view or the page.
export function showError(where, err) {
  if (!where) return;
  where.textContent = err ? String(err.message || err) : "";
  where.hidden = !err;
}

export function loading(text = "Loading…") {
  return h("p", { class: "muted", role: "status" }, text);
}

// A definition list from [label, value] pairs (empty values left out).
export function facts(pairs, testid) {
  return h("dl", { class: "facts", testid },
    pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
      .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}
