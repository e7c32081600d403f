// ksched local's web view: renders /ui/api/state and refreshes whenever the store's
// resourceVersion moves. No framework, no build step.
"use strict";

let shownVersion = null;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function podLink(key) {
  const a = el("span", { class: "pod", "data-pod": key }, key);
  a.addEventListener("click", () => explain(key));
  return a;
}

function fmtCpu(m) { return m % 1000 === 0 ? `${m / 1000}` : `${m}m`; }
function fmtMem(b) {
  const gi = 1 << 30, mi = 1 << 20;
  return b >= gi ? `${(b / gi).toFixed(1)}Gi` : `${Math.round(b / mi)}Mi`;
}

function bar(label, used, alloc, fmt) {
  const pct = alloc > 0 ? Math.min(100, (100 * used) / alloc) : 0;
  const inner = el("div");
  inner.style.width = `${pct}%`;
  return el("div", { class: "bar", title: `${label} ${fmt(used)} / ${fmt(alloc)}` }, inner,
    el("span", {}, `${label} ${fmt(used)} / ${fmt(alloc)}`));
}

function render(state) {
  const nodes = Object.values(state.zones).reduce((n, z) => n + z.length, 0);
  document.getElementById("summary").textContent =
    `${nodes} nodes, ${state.pods} pods, ${state.pending.length} pending (resourceVersion ${state.resourceVersion})`;
  document.title = `ksched local: ${state.pods} pods, ${state.pending.length} pending, newest ${state.newest || "-"}`;

  const pending = document.getElementById("pending");
  pending.replaceChildren(...state.pending.map(p =>
    el("li", { "data-pending": p.pod }, podLink(p.pod), ": ", el("span", { class: "message" }, p.message))));
  if (state.pending.length === 0) pending.replaceChildren(el("li", {}, "none"));

  const zones = document.getElementById("zones");
  zones.replaceChildren(...Object.entries(state.zones).map(([zone, list]) =>
    el("div", { class: "zone" }, el("h2", {}, `zone ${zone}`),
      el("div", { class: "nodes" }, ...list.map(n =>
        el("div", { class: n.unschedulable ? "node cordoned" : "node", "data-node": n.name },
          el("h3", {}, n.name + (n.unschedulable ? " (cordoned)" : "")),
          bar("cpu", n.cpu.used, n.cpu.allocatable, fmtCpu),
          bar("mem", n.memory.used, n.memory.allocatable, fmtMem),
          el("ul", {}, ...n.pods.map(p => el("li", {}, podLink(p))))))))));
}

async function refresh() {
  try {
    const v = await (await fetch("/ui/api/version", { cache: "no-store" })).text();
    if (v !== shownVersion) {
      const state = await (await fetch("/ui/api/state", { cache: "no-store" })).json();
      render(state);
      shownVersion = String(state.resourceVersion);
    }
  } catch (e) {
    document.getElementById("summary").textContent = `disconnected: ${e}`;
  }
  setTimeout(refresh, 500);
}

async function explain(key) {
  const [ns, name] = key.split("/");
  document.getElementById("explain-section").hidden = false;
  document.getElementById("explain-pod").textContent = key;
  const out = document.getElementById("explain");
  out.textContent = "explaining…";
  const r = await fetch(`/ui/api/explain/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`);
  out.textContent = await r.text();
}

document.getElementById("explain-close").addEventListener("click", () => {
  document.getElementById("explain-section").hidden = true;
});
refresh();
