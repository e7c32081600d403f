// ksched local's web view. It renders the snapshots pushed by /ui/api/watch, a server-sent-events
// stream fed by the API server's watch: EventSource reconnects by itself and resumes from the
// last snapshot's resourceVersion (Last-Event-ID). Only while the stream is down does the page
// poll /ui/api/state, slowly. No framework, no build step.
"use strict";

const FALLBACK_MS = 5000;
let source = null;
let fallback = null;

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

// A device and who holds what of it: one segment per allocation, then what is left. A device
// that is partly used shows its leftover in amber: a fraction of a GPU that only a small enough
// claim can still use.
function device(d) {
  const unit = d.capacity ? ` ${d.capacity}` : "";
  const segments = d.shares.map(s => {
    const seg = el("div", { class: "share", "data-holder": s.holder, title: `${s.holder}: ${s.amount}${unit}` },
      `${s.holder.split("/").pop()} ${d.capacity ? s.amount : "whole"}`);
    seg.style.width = `${(100 * s.amount) / d.total}%`;
    return seg;
  });
  const free = d.total - d.used;
  if (free > 0) {
    const partial = d.used > 0;
    const seg = el("div", { class: partial ? "free partial" : "free", title: `free: ${free}${unit}` },
      d.capacity ? `free ${free}` : "free");
    seg.style.width = `${(100 * free) / d.total}%`;
    segments.push(seg);
  }
  const label = d.name + (d.model ? ` ${d.model}` : "");
  return el("div", { class: "device", "data-device": d.id, "data-free": `${free}` },
    el("span", { class: "device-name" }, label), el("div", { class: "device-bar" }, ...segments));
}

function render(state, via) {
  const nodes = Object.values(state.zones).reduce((n, z) => n + z.length, 0);
  document.getElementById("summary").textContent =
    `${nodes} nodes, ${state.pods} pods, ${state.pending.length} pending (resourceVersion ${state.resourceVersion})`;
  const where = state.newest ? (state.newestNode ? ` on ${state.newestNode}` : " pending") : "";
  document.title =
    `ksched local: ${state.pods} pods, ${state.pending.length} pending, newest ${state.newest || "-"}${where} [${via}]`;

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
          ...(n.devices.length ? [el("div", { class: "devices" }, ...n.devices.map(device))] : []),
          el("ul", {}, ...n.pods.map(p => el("li", {}, podLink(p))))))))));
}

function connect() {
  source = new EventSource("/ui/api/watch");
  source.addEventListener("state", e => {
    stopFallback();
    render(JSON.parse(e.data), "live");
  });
  source.onerror = () => {
    document.getElementById("summary").textContent = "disconnected from the watch, reconnecting…";
    // CONNECTING: the browser retries by itself. CLOSED (an HTTP error): start over, and keep the
    // page roughly current meanwhile.
    if (source.readyState === EventSource.CLOSED) {
      source.close();
      startFallback();
      setTimeout(connect, FALLBACK_MS);
    }
  };
}

function startFallback() {
  if (fallback !== null) return;
  const poll = async () => {
    try {
      render(await (await fetch("/ui/api/state", { cache: "no-store" })).json(), "polling");
    } catch (e) {
      document.getElementById("summary").textContent = `disconnected: ${e}`;
    }
  };
  poll();
  fallback = setInterval(poll, FALLBACK_MS);
}

function stopFallback() {
  if (fallback !== null) clearInterval(fallback);
  fallback = null;
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
// `?snapshot` renders the state once and holds no connection: a headless browser dumping the DOM
// or taking a screenshot waits for the network to go idle, which a live stream never does.
if (new URLSearchParams(location.search).has("snapshot")) {
  fetch("/ui/api/state", { cache: "no-store" }).then(r => r.json()).then(s => render(s, "snapshot"));
} else {
  connect();
}
