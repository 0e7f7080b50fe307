// allocd's operator view: keeps a page live over server-sent events and sends the actions to the
// /v1 API. Everything shown from data goes through textContent; the only HTML inserted is the
// server's own rendering of the page's live part.
"use strict";
(function () {
  const live = document.getElementById("live");
  const conn = document.getElementById("conn");
  const admin = document.body.dataset.mode === "admin";
  let source = null;
  let preview = null; // the last preview's answer, drawn again after each update
  let selected = null; // the explained queue: {topic, broker, queue}
  let updates = 0;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function toast(msg, bad) {
    const t = document.getElementById("toast");
    t.textContent = msg;
    t.className = bad ? "bad" : "";
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { t.hidden = true; }, 6000);
  }

  // ---- Live updates

  function pageAddress() { return location.pathname + location.search; }

  function connect() {
    if (source) source.close();
    clearInterval(connect.fallback);
    source = new EventSource("/ui/events?page=" + encodeURIComponent(pageAddress()));
    source.addEventListener("live", (ev) => swap(ev.data));
    source.onopen = () => { document.body.classList.add("live"); conn.textContent = "live"; };
    source.onerror = () => {
      document.body.classList.remove("live");
      if (source.readyState === EventSource.CLOSED) {
        // Refused (too many live pages): reload the live part every few seconds instead.
        conn.textContent = "refreshing every 3 s";
        clearInterval(connect.fallback);
        connect.fallback = setInterval(refresh, 3000);
      } else {
        conn.textContent = "reconnecting";
      }
    };
  }

  async function refresh() {
    const u = new URL(location.href);
    u.searchParams.set("fragment", "1");
    try {
      const resp = await fetch(u);
      if (resp.ok || resp.status === 404) swap(await resp.text());
    } catch (e) { conn.textContent = "daemon unreachable"; }
  }

  function swap(html) {
    const open = new Set();
    live.querySelectorAll("details[open]").forEach((d) => open.add(d.dataset.key));
    const focused = document.activeElement && live.contains(document.activeElement) ? keyOf(document.activeElement) : null;
    live.innerHTML = html;
    live.querySelectorAll("details").forEach((d) => { if (open.has(d.dataset.key)) d.open = true; });
    applyFilter();
    drawPreview();
    markSelected();
    if (focused) {
      const again = live.querySelector(focused);
      if (again) again.focus();
    }
    updates++;
    document.body.dataset.updates = String(updates);
  }

  // keyOf is a selector that finds the same element after an update.
  function keyOf(e) {
    if (e.dataset && e.dataset.broker !== undefined) {
      return "button." + e.classList[0] + '[data-topic="' + CSS.escape(e.dataset.topic) + '"][data-broker="' + CSS.escape(e.dataset.broker) + '"][data-queue="' + CSS.escape(e.dataset.queue) + '"]';
    }
    if (e.tagName === "SUMMARY" && e.parentElement.dataset.key !== undefined) {
      return 'details[data-key="' + CSS.escape(e.parentElement.dataset.key) + '"] > summary';
    }
    return null;
  }

  // ---- Groups: filter by name as one types; the address keeps the filter (bookmarkable).

  const filter = document.getElementById("q");
  function applyFilter() {
    if (!filter) return;
    const q = filter.value.toLowerCase();
    live.querySelectorAll("#groups tbody tr").forEach((tr) => {
      tr.hidden = q !== "" && !tr.dataset.name.toLowerCase().includes(q);
    });
  }
  if (filter) {
    filter.addEventListener("input", () => {
      const u = new URL(location.href);
      if (filter.value) u.searchParams.set("q", filter.value); else u.searchParams.delete("q");
      history.replaceState(null, "", u);
      applyFilter();
      clearTimeout(filter.timer);
      filter.timer = setTimeout(connect, 300); // the stream follows the new address
    });
  }

  // ---- A group: explain a queue


  const explainBody = document.getElementById("explain-body");
  const explainGroup = document.getElementById("explain") && document.getElementById("explain").dataset.group;

  function markSelected() {
    live.querySelectorAll("button.q.selected").forEach((b) => b.classList.remove("selected"));
    if (!selected) return;
    const b = live.querySelector('button.q[data-topic="' + CSS.escape(selected.topic) + '"][data-broker="' + CSS.escape(selected.broker) + '"][data-queue="' + CSS.escape(selected.queue) + '"]');
    if (b) b.classList.add("selected");
  }

  async function explain(topic, broker, queue) {
    selected = { topic, broker, queue };
    markSelected();
    const u = new URL(location.href);
    u.searchParams.set("queue", topic + "/" + broker + "/" + queue);
    history.replaceState(null, "", u);
    explainBody.textContent = "Asking…";
    const q = new URLSearchParams({ topic, brokerName: broker, queueId: queue });
    try {
      const resp = await fetch("/v1/groups/" + encodeURIComponent(explainGroup) + "/explain?" + q);
      const body = await resp.json();
      if (!resp.ok) throw new Error(body.error || resp.statusText);
      explainBody.replaceChildren();
      const head = el("p");
      head.append(el("strong", broker + "/" + queue + " of " + topic), document.createTextNode(": owner " + (body.owner || "none") + " since generation " + body.generation));
      explainBody.append(head);
      const ol = el("ol", undefined, "timeline explain");
      (body.changes || []).forEach((c) => {
        const li = el("li");
        li.append(el("strong", "generation " + c.generation), document.createTextNode(": " + c.summary + (c.pendingTo ? " (held back for " + c.pendingTo + ")" : "")));
        ol.append(li);
      });
      if (!ol.children.length) ol.append(el("li", "No change of owner in the history kept (from generation " + body.oldest + ")."));
      explainBody.append(ol);
    } catch (err) {
      explainBody.replaceChildren(el("span", "Explain failed: " + err.message, "error"));
    }
  }

  // ---- A group: preview another binding, drawn on the grid

  const form = document.getElementById("preview-form");
  const result = document.getElementById("preview-result");
  const clearBtn = document.getElementById("preview-clear");
  const applyBtn = document.getElementById("apply");

  function proposedBinding() {
    const b = JSON.parse(form.dataset.binding);
    b.strategy = form.elements.strategy.value;
    b.config = {};
    for (const line of form.elements.config.value.split("\n")) {
      const t = line.trim();
      if (!t) continue;
      const i = t.indexOf("=");
      if (i <= 0) throw new Error("config line " + JSON.stringify(t) + " is not key=value");
      b.config[t.slice(0, i).trim()] = t.slice(i + 1).trim();
    }
    return b;
  }

  function ownerNumbers() {
    const n = {};
    live.querySelectorAll(".legend li").forEach((li) => {
      const sw = li.querySelector(".sw");
      n[li.textContent.replace(sw.textContent, "").replace(" (gone)", "").trim()] = sw.textContent;
    });
    return n;
  }

  function drawPreview() {
    live.querySelectorAll("button.q.moved").forEach((b) => { b.classList.remove("moved"); delete b.dataset.to; delete b.dataset.toLabel; });
    live.querySelectorAll("tr.qrow.moved").forEach((r) => { r.classList.remove("moved"); delete r.dataset.to; });
    if (!preview) return;
    const nums = ownerNumbers();
    for (const [topic, tp] of Object.entries(preview.topics || {})) {
      for (const m of tp.moves || []) {
        const sel = '[data-topic="' + CSS.escape(topic) + '"][data-broker="' + CSS.escape(m.queue.brokerName) + '"][data-queue="' + m.queue.queueId + '"]';
        live.querySelectorAll("button.q" + sel + ", tr.qrow" + sel).forEach((e) => {
          e.classList.add("moved");
          e.dataset.to = m.to;
          if (e.tagName === "BUTTON") {
            e.dataset.toLabel = "→" + (nums[m.to] || "?");
            e.title = e.title.replace(/; would move to .*$/, "") + "; would move to " + (m.to || "nobody");
          }
        });
      }
    }
  }

  function showPreview(p) {
    result.replaceChildren();
    let total = 0;
    for (const [topic, tp] of Object.entries(p.topics || {}).sort()) {
      const sec = el("div");
      if (tp.error) {
        sec.append(el("p", topic + ": the strategy failed: " + tp.error, "error"));
      } else {
        total += tp.moves.length;
        sec.append(el("p", topic + ": " + tp.moves.length + " queue" + (tp.moves.length === 1 ? "" : "s") + " would move (against generation " + tp.generation + ")"));
        const ul = el("ul", undefined, "previewmoves");
        tp.moves.forEach((m) => ul.append(el("li", m.queue.brokerName + "/" + m.queue.queueId + ": " + (m.from || "(none)") + " → " + (m.to || "(none)"))));
        if (tp.moves.length) sec.append(ul);
      }
      result.append(sec);
    }
    result.dataset.moves = String(total);
    if (!Object.keys(p.topics || {}).length) result.append(el("p", "The group has no topic: nothing would move."));
  }

  if (form) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      let binding;
      try { binding = proposedBinding(); } catch (err) { result.replaceChildren(el("p", err.message, "error")); return; }
      result.textContent = "Computing…";
      try {
        const resp = await fetch("/v1/groups/" + encodeURIComponent(form.dataset.group) + "/preview", {
          method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(binding),
        });
        const body = await resp.json();
        if (!resp.ok) throw new Error(body.error || resp.statusText);
        preview = body;
        showPreview(body);
        drawPreview();
        clearBtn.hidden = false;
        if (applyBtn) { applyBtn.hidden = false; applyBtn.textContent = "Bind the group to " + binding.strategy; }
      } catch (err) {
        preview = null;
        drawPreview();
        result.replaceChildren(el("p", "Preview failed: " + err.message, "error"));
      }
    });
    clearBtn.addEventListener("click", () => {
      preview = null;
      drawPreview();
      result.replaceChildren();
      clearBtn.hidden = true;
      if (applyBtn) applyBtn.hidden = true;
    });
  }

  // ---- Admin actions, each after a confirmation, through /v1 as curl would

  function confirmAction(text) {
    const d = document.getElementById("confirm");
    document.getElementById("confirm-text").textContent = text;
    d.returnValue = "";
    d.showModal();
    document.getElementById("confirm-cancel").focus();
    // A close event is fired after the dialog closes, as a task of its own: the one of the last
    // confirmation may still be on its way when this one opens, so a close is this one's only
    // once the dialog is closed.
    return new Promise((resolve) => {
      const closed = () => {
        if (d.open) return;
        d.removeEventListener("close", closed);
        resolve(d.returnValue === "ok");
      };
      d.addEventListener("close", closed);
    });
  }

  async function send(method, path, body) {
    const init = { method, headers: {} };
    if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    const resp = await fetch(path, init);
    if (!resp.ok) {
      let msg = resp.statusText;
      try { msg = (await resp.json()).error || msg; } catch (e) { /* not JSON */ }
      throw new Error(method + " " + path + ": " + resp.status + " " + msg);
    }
    return resp;
  }

  if (applyBtn) {
    applyBtn.addEventListener("click", async () => {
      const b = proposedBinding();
      const g = form.dataset.group;
      const n = result.dataset.moves || "?";
      if (!(await confirmAction("Bind group " + g + " to strategy " + b.strategy + "? " + n + " queues would move."))) return;
      try {
        await send("PUT", "/v1/groups/" + encodeURIComponent(g), b);
        form.dataset.binding = JSON.stringify(b);
        preview = null;
        drawPreview();
        result.replaceChildren(el("p", "Group " + g + " is bound to " + b.strategy + "; the next generation follows.", "done"));
        applyBtn.hidden = true;
        clearBtn.hidden = true;
        toast("Group " + g + " bound to " + b.strategy);
      } catch (err) {
        toast(err.message, true);
      }
    });
  }

  document.addEventListener("click", async (ev) => {
    const t = ev.target.closest("button");
    if (!t) return;
    if (t.matches("button.q, button.q-explain")) {
      explain(t.dataset.topic, t.dataset.broker, t.dataset.queue);
      return;
    }
    if (!admin) return;
    const action = t.dataset.action;
    const name = t.dataset.name;
    if (action === "delete-group") {
      if (!(await confirmAction("Delete group " + name + "? Its members lose their queues and its history goes."))) return;
      try { await send("DELETE", "/v1/groups/" + encodeURIComponent(name)); location.assign("/ui/groups?deleted=" + encodeURIComponent(name)); } catch (err) { toast(err.message, true); }
    } else if (action === "delete-topic") {
      if (!(await confirmAction("Delete topic " + name + "?"))) return;
      try { await send("DELETE", "/v1/topics/" + encodeURIComponent(name)); toast("Topic " + name + " deleted"); } catch (err) { toast(err.message, true); }
    }
  });

  // A bookmarked queue is explained at once.
  if (explainBody) {
    const q = new URLSearchParams(location.search).get("queue");
    if (q) {
      const parts = q.split("/");
      if (parts.length >= 3) explain(parts[0], parts.slice(1, -1).join("/"), parts[parts.length - 1]);
    }
  }
  const deleted = new URLSearchParams(location.search).get("deleted");
  if (deleted) toast("Group " + deleted + " deleted");

  applyFilter();
  connect();
})();
