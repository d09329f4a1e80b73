// The outbox admin page: plain JavaScript on the handler's JSON API, no
// build step. Every value from the server is written as text (textContent),
// never as HTML. URLs are relative, so the page works under any prefix.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);

  const state = {
    info: null,
    source: "",
    tab: "dead",
    dead: { filter: { type: "", aggregate: "", tenant: "" }, pages: [""], matching: 0, selected: new Set(), ids: [] },
    events: { filter: { status: "", type: "", aggregate: "", tenant: "" }, pages: [""] },
    audit: { pages: [""] },
  };

  // el builds an element: attrs are properties (class, dataset, on…
  // handlers), children are nodes or text.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (k in e) e[k] = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  class APIError extends Error {
    constructor(status, body) {
      super((body && body.error) || "HTTP " + status);
      this.status = status;
      this.code = body && body.code;
    }
  }

  // api calls the JSON API; a mutation sends JSON, which the handler
  // requires (a CSRF defence).
  async function api(path, opts = {}) {
    const init = { method: opts.method || "GET", headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (init.method !== "GET") {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(opts.body || {});
    }
    const resp = await fetch("api/" + path, init);
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) throw new APIError(resp.status, body);
    return body;
  }

  const src = () => encodeURIComponent(state.source);
  const canMutate = () => state.info && state.info.authorized;

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
    const s = q.toString();
    return s ? "?" + s : "";
  }

  // Times: UTC, to the second, with the age next to them.
  function fmtTime(iso) {
    if (!iso) return "–";
    return iso.replace("T", " ").replace(/\.\d+Z$/, "Z");
  }
  // fmtAge: "2d 3h", "5h 12m", "50m", "12s".
  function fmtAge(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    const units = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]];
    for (let i = 0; i < units.length; i++) {
      const [u, n] = units[i];
      if (seconds < n && u !== "s") continue;
      const first = Math.floor(seconds / n) + u;
      if (i >= 2) return first;
      const [u2, n2] = units[i + 1];
      const rest = Math.floor((seconds % n) / n2);
      return rest ? first + " " + rest + u2 : first;
    }
    return "";
  }
  function ageOf(iso) {
    if (!iso) return "";
    const s = (Date.now() - Date.parse(iso)) / 1000;
    return s >= 0 ? fmtAge(s) + " ago" : "in " + fmtAge(-s);
  }
  function timeCell(iso) {
    return el("td", { class: "time" }, fmtTime(iso), iso ? el("div", { class: "age" }, ageOf(iso)) : null);
  }
  const firstLine = (s) => (s || "").split("\n")[0];
  const plural = (n, w) => n + " " + w + (n === 1 ? "" : "s");

  let noticeTimer = 0;
  function notice(text, isError) {
    const n = $("notice");
    n.textContent = text;
    n.className = "notice" + (isError ? " error" : "");
    n.hidden = false;
    clearTimeout(noticeTimer);
    if (!isError) noticeTimer = setTimeout(() => { n.hidden = true; }, 8000);
  }
  function showError(err) { notice(err.message || String(err), true); }

  // confirm asks in a modal dialog; it resolves to true only when the
  // operator clicks the action button.
  // opts.reason ("required" or "optional") asks for a reason, and the
  // promise then resolves to it (a string) instead of true; opts.plan
  // shows a replay's dry run: events per type and per tenant.
  function confirmDialog(title, text, ids, action, danger, opts = {}) {
    const d = $("confirm");
    const reason = $("confirm-reason");
    reason.value = "";
    $("confirm-reason-label").hidden = !opts.reason;
    const plan = $("confirm-plan");
    plan.hidden = !opts.plan;
    if (opts.plan) {
      const rows = [];
      const n = Math.max(opts.plan.types.length, opts.plan.tenants.length);
      for (let i = 0; i < Math.min(n, 10); i++) {
        const ty = opts.plan.types[i], te = opts.plan.tenants[i];
        rows.push(el("tr", {}, el("td", {}, ty ? ty.name : ""), el("td", {}, ty ? ty.events : ""),
          el("td", {}, te ? (te.name || "(none)") : ""), el("td", {}, te ? te.events : "")));
      }
      if (n > 10 || opts.plan.other_types || opts.plan.other_tenants) rows.push(el("tr", {}, el("td", { colSpan: 4 }, "… and more")));
      plan.tBodies[0].replaceChildren(...rows);
    }
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    const list = $("confirm-ids");
    list.replaceChildren(...(ids || []).slice(0, 20).map((id) => el("li", {}, id)));
    if (ids && ids.length > 20) list.append(el("li", {}, "… and " + (ids.length - 20) + " more"));
    list.hidden = !ids || ids.length === 0;
    const ok = $("confirm-ok");
    ok.textContent = action;
    ok.className = danger ? "danger" : "";
    return new Promise((resolve) => {
      const done = (v) => {
        ok.onclick = null;
        $("confirm-cancel").onclick = null;
        d.onclose = null;
        if (d.open) d.close();
        resolve(v);
      };
      ok.onclick = () => {
        if (!opts.reason) return done(true);
        const why = reason.value.trim();
        if (opts.reason === "required" && !why) { reason.focus(); reason.placeholder = "a reason is required"; return; }
        done(why);
      };
      $("confirm-cancel").onclick = () => done(false);
      // The close event of the previous question comes later, as a task:
      // by then this dialog may be open again, and it is not its answer.
      d.onclose = () => { if (!d.open) done(false); };
      d.showModal();
      (opts.reason ? reason : $("confirm-cancel")).focus();
    });
  }

  function renderSources() {
    const nav = $("sources");
    const names = state.info.sources.map((s) => s.name);
    if (names.length === 1) {
      nav.replaceChildren(el("span", { class: "only" }, names[0]));
      return;
    }
    nav.replaceChildren(...names.map((n) => el("button", {
      type: "button", dataset: { source: n }, "aria-current": String(n === state.source),
      onclick: () => { if (n !== state.source) selectSource(n); },
    }, n)));
  }

  function renderMode() {
    const info = state.info;
    const mode = $("mode");
    const banner = $("banner");
    if (info.read_only) {
      mode.textContent = "read-only";
      mode.className = "badge ro";
      banner.textContent = "Read-only: this admin handler has no authorizer, so replay and delete are disabled. " +
        "Set Config.Authorize on the server to enable them.";
      banner.hidden = false;
    } else if (!info.authorized) {
      mode.textContent = "read-only for you";
      mode.className = "badge ro";
      banner.textContent = "You may not replay or delete events: " + (info.authorization_error || "not authorized") + ".";
      banner.hidden = false;
    } else {
      mode.textContent = "operator actions enabled";
      mode.className = "badge rw";
      banner.hidden = true;
    }
    if (!canMutate()) {
      // No buttons at all, not merely hidden ones.
      for (const e of document.querySelectorAll(".mutate")) e.remove();
    }
  }

  async function loadStats() {
    const st = await api(src() + "/stats");
    for (const s of ["NEW", "RETRY", "DONE", "DEAD"]) $("stat-" + s).textContent = st.counts[s];
    if (st.done_estimated) $("stat-DONE").textContent = "≈ " + st.counts.DONE;
    $("stat-due").textContent = st.due;
    $("stat-oldest").textContent = st.oldest_pending_at
      ? fmtTime(st.oldest_pending_at) + " (" + fmtAge(st.oldest_pending_age_seconds) + " ago)" : "none";
    $("tab-dead").textContent = "Dead letters (" + st.counts.DEAD + ")";
  }

  // fmtBytes: "812 KiB", "80.0 MiB".
  function fmtBytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(n) : n.toFixed(1)) + " " + units[i];
  }

  // renderHorizon shows the horizon guard's report (PostgreSQL), or hides
  // the panel without one. Every text from the database goes in as text.
  function renderHorizon(hz) {
    const panel = $("horizon-panel");
    panel.hidden = !hz;
    if (!hz) return;
    const warned = hz.warnings.length > 0;
    panel.classList.toggle("bad", warned);
    $("horizon-warnings").hidden = !warned;
    $("horizon-warnings").querySelector("ul").replaceChildren(...hz.warnings.map((w) => el("li", { dataset: { check: w.check } }, w.message)));
    $("horizon-dead").textContent = hz.dead_tuples.toLocaleString("en");
    $("horizon-live").textContent = hz.live_tuples.toLocaleString("en");
    $("horizon-size").textContent = fmtBytes(hz.table_bytes);
    const last = [hz.last_vacuum, hz.last_autovacuum].filter(Boolean).sort().pop();
    $("horizon-vacuum").textContent = last ? fmtTime(last) + " (" + ageOf(last) + ")" : "never";
    const rows = hz.holders.map((ho) => el("tr", { dataset: { kind: ho.kind } }, el("td", {}, ho.kind), el("td", {}, ho.pid || "–"),
      el("td", {}, ho.name || "–"), el("td", {}, ho.state || "–"), el("td", {}, ho.age_seconds ? fmtAge(ho.age_seconds) : "–"),
      el("td", {}, ho.xid_age.toLocaleString("en"))));
    $("horizon-holders").tBodies[0].replaceChildren(...rows);
    $("horizon-empty").hidden = rows.length > 0;
    $("horizon-hidden").hidden = !hz.hidden_sessions;
    $("horizon-hidden").textContent = hz.hidden_sessions ? plural(hz.hidden_sessions, "session") +
      " of other roles hide their transactions from the outbox's role (grant it pg_read_all_stats to see them)." : "";
  }

  async function loadHealth() {
    const h = await api(src() + "/health");
    const card = (id, text, cls) => { const v = $(id); v.textContent = text; v.parentElement.className = "card" + (v.parentElement.classList.contains("wide") ? " wide" : "") + (cls ? " " + cls : ""); };
    card("health-started", (h.started ? "started" : "not started") + (h.mode ? ", " + h.mode : ""), h.started ? "" : "warn");
    card("health-poll", h.last_poll_at ? fmtTime(h.last_poll_at) + " (" + fmtAge(h.last_poll_age_seconds) + " ago)" : "none yet", h.last_poll_at ? "" : "warn");
    card("health-nodes", String(h.nodes), "");
    card("health-breakers", String(h.open_breakers), h.open_breakers ? "bad" : "");
    card("health-error", h.last_error ? firstLine(h.last_error) + " (" + ageOf(h.last_error_at) + ")" : "none", h.last_error ? "bad" : "");
    $("health-error").title = h.last_error || "";
    const pauses = h.paused.map((p) => {
      const cells = [el("td", {}, p.scope === "*" ? "* (every type)" : p.scope), el("td", {}, p.by), el("td", { title: fmtTime(p.at) }, ageOf(p.at)), el("td", {}, p.reason || "")];
      if (canMutate()) {
        cells.push(el("td", {}, el("button", { type: "button", class: "small", dataset: { action: "resume", scope: p.scope }, onclick: () => resume(p.scope) }, "Resume")));
      }
      return el("tr", { dataset: { scope: p.scope } }, ...cells);
    });
    $("pauses-table").tBodies[0].replaceChildren(...pauses);
    $("pauses-empty").hidden = pauses.length > 0;
    const routes = h.routes.map((r) => {
      const limits = [r.rate ? r.rate + "/s" : "", r.concurrency ? r.concurrency + " at once" : ""].filter(Boolean).join(", ") || "–";
      return el("tr", { dataset: { type: r.type } }, el("td", {}, r.type),
        el("td", {}, el("span", { class: "breaker " + r.breaker }, r.breaker)), el("td", {}, r.failures),
        el("td", {}, r.opened_at ? ageOf(r.opened_at) + " (" + plural(r.opens, "time") + ")" : "–"),
        el("td", {}, r.paused ? el("span", { class: "paused-tag" }, "paused") : "–"), el("td", {}, limits), el("td", {}, r.in_flight));
    });
    $("routes-table").tBodies[0].replaceChildren(...routes);
    $("routes-empty").hidden = routes.length > 0;
    renderHorizon(h.horizon);
  }

  async function pause(form) {
    const scope = form.elements.scope.value.trim(), reason = form.elements.reason.value.trim();
    if (!scope || !reason) return;
    try {
      await api(src() + "/actions/pause", { method: "POST", body: { scope, reason } });
      form.reset();
      notice("Paused " + (scope === "*" ? "every event type" : scope) + ": no instance claims its events until it is resumed.", false);
    } catch (err) {
      showError(err);
    }
    await refresh();
  }

  async function resume(scope) {
    const ok = await confirmDialog("Resume " + (scope === "*" ? "every event type" : scope) + "?",
      "Its events are claimed and delivered again by every instance.", [], "Resume", false);
    if (!ok) return;
    try {
      await api(src() + "/actions/resume", { method: "POST", body: { scope } });
      notice("Resumed " + scope + ".", false);
    } catch (err) {
      showError(err);
    }
    await refresh();
  }

  async function loadAudit() {
    const a = state.audit;
    const before = a.pages[a.pages.length - 1];
    const res = await api(src() + "/audit" + query({ before, limit: 50 }));
    const rows = res.entries.map((e) => el("tr", {},
      el("td", { class: "num" }, e.id), timeCell(e.at), el("td", { class: "actor", title: e.actor }, e.actor),
      el("td", { class: "action" }, e.action), el("td", { class: "num" }, e.count),
      el("td", { class: "target", title: e.target }, e.target), el("td", { class: "err", title: e.reason || "" }, el("div", {}, e.reason || ""))));
    $("audit-table").tBodies[0].replaceChildren(...rows);
    $("audit-empty").hidden = rows.length > 0;
    pager("audit", a.pages, res.next_before ? String(res.next_before) : "");
  }

  // act runs an operator action on events in any status, after a
  // confirmation that asks for the reason.
  async function act(action, ids, title, text, button, reason) {
    const why = await confirmDialog(title, text, ids, button, true, { reason });
    if (why === false) return;
    try {
      const res = await api(src() + "/actions/" + action, { method: "POST", body: { ids, reason: why } });
      await afterChange(button + ": " + plural(res.changed, "event") + " changed.");
    } catch (err) {
      showError(err);
      await refresh();
    }
  }

  // eventActions are the buttons of the operator actions on event e in
  // any status: force DEAD and skip for a pending one, delete for any.
  function eventActions(e) {
    const pending = e.status === "NEW" || e.status === "RETRY";
    const button = (action, label, cls, run) => el("button", { type: "button", class: "small " + cls, dataset: { action, id: e.id },
      onclick: () => { $("detail").close(); run(); } }, label);
    return [
      pending ? button("force-dead", "Force DEAD", "danger", () => act("force-dead", [e.id], "Move event to DEAD?",
        "It goes DEAD at once, undelivered; a delivery running now stores nothing. It can be replayed later.", "Force DEAD", "required")) : null,
      pending ? button("skip-head", "Skip", "", () => act("skip-head", [e.id], "Skip event?",
        "It becomes DONE without being delivered, so the later events of its ordering key go on.", "Skip", "required")) : null,
      button("delete-any", "Delete", "danger", () => act("delete", [e.id], "Delete " + e.status + " event for good?",
        "It is removed from the outbox table, whatever its status, and is never delivered.", "Delete", "optional")),
    ].filter(Boolean);
  }

  function idLink(id) {
    return el("a", { class: "id", href: "#", onclick: (e) => { e.preventDefault(); showEvent(id); } }, id);
  }
  function aggregateText(e) {
    if (e.decode_error) return "?";
    return (e.aggregate_type || "") + (e.aggregate_id ? " " + e.aggregate_id : "");
  }
  // The event type, and the subscribers it still owes when it names them.
  function typeText(e) {
    return (e.type || "?") + (e.subscribers ? " [" + e.subscribers.join(", ") + "]" : "");
  }
  // Cells cut with an ellipsis carry their whole text as a tooltip.
  function typeCell(e) { const t = typeText(e); return el("td", { class: "type", title: t }, t); }
  function aggregateCell(e) { const t = aggregateText(e); return el("td", { class: "agg", title: t }, t); }

  function errorCell(e) {
    const text = e.decode_error ? "cannot decode: " + e.decode_error : firstLine(e.last_error);
    return el("td", { class: "err", title: e.decode_error || e.last_error || "" }, el("div", {}, text));
  }

  async function loadDead() {
    const d = state.dead;
    const after = d.pages[d.pages.length - 1];
    const res = await api(src() + "/dead" + query({ ...d.filter, after, limit: 50 }));
    d.matching = res.matching;
    d.ids = res.events.map((e) => e.id);
    for (const id of [...d.selected]) if (!d.ids.includes(id)) d.selected.delete(id);
    const rows = res.events.map((e) => {
      const cells = [];
      if (canMutate()) {
        cells.push(el("td", { class: "check" }, el("input", {
          type: "checkbox", checked: d.selected.has(e.id), "aria-label": "select " + e.id,
          onchange: (ev) => { if (ev.target.checked) d.selected.add(e.id); else d.selected.delete(e.id); updateDeadButtons(); },
        })));
      }
      cells.push(el("td", { class: "id" }, idLink(e.id)), typeCell(e), aggregateCell(e),
        el("td", { class: "num" }, e.attempts), timeCell(e.done_at || e.created_at), errorCell(e));
      if (canMutate()) {
        cells.push(el("td", { class: "actions" },
          el("button", { type: "button", class: "small", dataset: { action: "replay", id: e.id }, onclick: () => replay([e.id]) }, "Replay"),
          el("button", { type: "button", class: "small danger", dataset: { action: "delete", id: e.id }, onclick: () => remove([e.id]) }, "Delete")));
      }
      return el("tr", { dataset: { id: e.id } }, ...cells);
    });
    $("dead-table").tBodies[0].replaceChildren(...rows);
    $("dead-empty").hidden = rows.length > 0;
    const filtered = d.filter.type || d.filter.aggregate || d.filter.tenant;
    $("dead-matching").textContent = plural(res.matching, "DEAD event") + (filtered ? " match the filter" : "");
    pager("dead", d.pages, res.next_after);
    updateDeadButtons();
  }

  function updateDeadButtons() {
    if (!canMutate()) return;
    const d = state.dead;
    const n = d.selected.size;
    $("replay-selected").disabled = n === 0;
    $("delete-selected").disabled = n === 0;
    $("replay-selected").textContent = n ? "Replay " + n + " selected" : "Replay selected";
    $("delete-selected").textContent = n ? "Delete " + n + " selected" : "Delete selected";
    $("replay-all").disabled = d.matching === 0;
    $("replay-all").textContent = "Replay all " + d.matching + " matching";
    const all = $("dead-select-all");
    all.checked = d.ids.length > 0 && d.ids.every((id) => d.selected.has(id));
  }

  function pager(name, pages, next) {
    $(name + "-prev").disabled = pages.length <= 1;
    $(name + "-next").disabled = !next;
    $(name + "-next").dataset.after = next || "";
    $(name + "-page").textContent = "page " + pages.length;
  }

  async function loadEvents() {
    const v = state.events;
    const after = v.pages[v.pages.length - 1];
    const res = await api(src() + "/events" + query({ ...v.filter, after, limit: 50 }));
    const rows = res.events.map((e) => el("tr", { dataset: { id: e.id } },
      el("td", { class: "id" }, idLink(e.id)),
      el("td", { class: "st" }, el("span", { class: "status " + e.status }, e.status)),
      typeCell(e), aggregateCell(e), el("td", { class: "num" }, e.attempts),
      timeCell(e.created_at), timeCell(e.available_at), errorCell(e)));
    $("events-table").tBodies[0].replaceChildren(...rows);
    $("events-empty").hidden = rows.length > 0;
    pager("events", v.pages, res.next_after);
  }

  async function showEvent(id) {
    let e;
    try {
      e = await api(src() + "/events/" + encodeURIComponent(id));
    } catch (err) {
      showError(err);
      return;
    }
    $("detail-title").textContent = "Event " + e.id;
    const fields = [
      ["Status", e.status], ["Type", e.type], ["Aggregate", aggregateText(e)], ["Tenant", e.tenant_id], ["Subscribers", (e.subscribers || []).join(", ")],
      ["Schema version", e.schema_version],
      ["Attempts", e.attempts], ["Occurred at", fmtTime(e.occurred_at)], ["Created at", fmtTime(e.created_at)],
      ["Available at", fmtTime(e.available_at)], [e.status === "DEAD" ? "Died at" : "Done at", fmtTime(e.done_at)], ["Locked by", e.locked_by],
      ["Locked at", fmtTime(e.locked_at)], ["Decode error", e.decode_error],
    ];
    $("detail-fields").replaceChildren(...fields.filter(([, v]) => v !== undefined && v !== "" && v !== "–")
      .flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
    const headers = Object.entries(e.headers || {}).sort(([a], [b]) => a.localeCompare(b));
    $("detail-headers").replaceChildren(...headers.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
    $("detail-headers-title").hidden = $("detail-headers").hidden = headers.length === 0;
    $("detail-error").textContent = e.last_error || "";
    $("detail-error-title").hidden = $("detail-error").hidden = !e.last_error;
    let payload = "";
    if (e.payload_kind === "json") payload = JSON.stringify(e.payload, null, 2);
    else if (e.payload_kind === "bytes") payload = e.payload || "";
    $("detail-payload-title").textContent = e.payload_kind === "bytes"
      ? "Payload (" + plural(e.payload_size, "byte") + ", base64)" : "Payload (JSON)";
    $("detail-payload").textContent = payload;
    $("detail-payload-title").hidden = $("detail-payload").hidden = !e.payload_kind;
    if (canMutate()) $("detail-actions").replaceChildren(...eventActions(e));
    $("detail").showModal();
  }

  // After a change: the stats, and the dead list from the same page (or
  // the one before, when the page is now empty).
  async function afterChange(text) {
    notice(text, false);
    await refresh();
    const d = state.dead;
    if (d.ids.length === 0 && d.pages.length > 1) {
      d.pages.pop();
      await loadDead().catch(showError);
    }
  }

  async function replay(ids) {
    const one = ids.length === 1;
    const ok = await confirmDialog(
      one ? "Replay DEAD event?" : "Replay " + ids.length + " DEAD events?",
      (one ? "It becomes" : "They become") + " NEW again, due now, with zero attempts; the outbox pollers of your services deliver " +
        (one ? "it." : "them."), ids, one ? "Replay" : "Replay " + ids.length, false);
    if (!ok) return;
    try {
      const res = one
        ? await api(src() + "/dead/" + encodeURIComponent(ids[0]) + "/replay", { method: "POST" })
        : await api(src() + "/dead/replay", { method: "POST", body: { ids } });
      for (const id of ids) state.dead.selected.delete(id);
      await afterChange("Replayed " + plural(res.replayed, "event") + ": NEW again, due now, with zero attempts.");
    } catch (err) {
      showError(err);
      await refresh();
    }
  }

  async function replayAll() {
    const d = state.dead;
    const what = [];
    if (d.filter.type) what.push("type " + d.filter.type);
    if (d.filter.aggregate) what.push("aggregate " + d.filter.aggregate);
    if (d.filter.tenant) what.push("tenant " + d.filter.tenant);
    let plan;
    try {
      plan = await api(src() + "/dead/replay", { method: "POST", body: { all: true, dry_run: true, ...d.filter } });
    } catch (err) {
      showError(err);
      return;
    }
    const ok = await confirmDialog("Replay all " + plural(plan.events, "matching DEAD event") + "?",
      "Every DEAD event " + (what.length ? "of " + what.join(", ") + " " : "") +
      "becomes NEW again, due now, with zero attempts — also any that went DEAD since this count. By type and tenant:",
      [], "Replay all", false, { plan });
    if (!ok) return;
    try {
      const res = await api(src() + "/dead/replay", { method: "POST", body: { all: true, ...d.filter } });
      d.selected.clear();
      d.pages = [""];
      await afterChange("Replayed " + plural(res.replayed, "event") + ": NEW again, due now, with zero attempts.");
    } catch (err) {
      showError(err);
      await refresh();
    }
  }

  async function remove(ids) {
    const one = ids.length === 1;
    const ok = await confirmDialog(one ? "Delete DEAD event for good?" : "Delete " + ids.length + " DEAD events for good?",
      (one ? "It is" : "They are") + " removed from the outbox table and cannot be replayed afterwards.",
      ids, one ? "Delete" : "Delete " + ids.length, true);
    if (!ok) return;
    try {
      const res = one
        ? await api(src() + "/dead/" + encodeURIComponent(ids[0]), { method: "DELETE" })
        : await api(src() + "/dead/delete", { method: "POST", body: { ids } });
      for (const id of ids) state.dead.selected.delete(id);
      await afterChange("Deleted " + plural(res.deleted, "DEAD event") + ".");
    } catch (err) {
      showError(err);
      await refresh();
    }
  }

  async function refresh() {
    try {
      const views = { dead: loadDead, events: loadEvents, audit: loadAudit };
      await Promise.all([loadStats(), loadHealth(), views[state.tab]()]);
    } catch (err) {
      showError(err);
    }
  }

  function selectTab(tab) {
    state.tab = tab;
    for (const t of document.querySelectorAll(".tab")) t.setAttribute("aria-selected", String(t.dataset.tab === tab));
    $("dead-view").hidden = tab !== "dead";
    $("events-view").hidden = tab !== "events";
    $("audit-view").hidden = tab !== "audit";
    writeHash();
    return refresh();
  }

  function selectSource(name) {
    state.source = name;
    state.dead.pages = [""];
    state.dead.selected.clear();
    state.events.pages = [""];
    state.audit.pages = [""];
    renderSources();
    writeHash();
    return refresh();
  }

  function writeHash() {
    history.replaceState(null, "", "#" + new URLSearchParams({ source: state.source, tab: state.tab }).toString());
  }

  function readForm(form, into) {
    for (const k of Object.keys(into)) into[k] = (form.elements[k].value || "").trim();
  }

  function wire() {
    $("refresh").addEventListener("click", refresh);
    for (const t of document.querySelectorAll(".tab")) t.addEventListener("click", () => selectTab(t.dataset.tab));
    $("detail-close").addEventListener("click", () => $("detail").close());

    $("audit-next").addEventListener("click", (e) => { state.audit.pages.push(e.target.dataset.after); loadAudit().catch(showError); });
    $("audit-prev").addEventListener("click", () => { if (state.audit.pages.length > 1) state.audit.pages.pop(); loadAudit().catch(showError); });
    const views = { dead: [state.dead, loadDead], events: [state.events, loadEvents] };
    for (const [name, [v, load]] of Object.entries(views)) {
      const form = $(name + "-filter");
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        readForm(form, v.filter);
        v.pages = [""];
        load().catch(showError);
      });
      form.addEventListener("reset", () => {
        setTimeout(() => { readForm(form, v.filter); v.pages = [""]; load().catch(showError); });
      });
      $(name + "-next").addEventListener("click", (e) => {
        v.pages.push(e.target.dataset.after);
        load().catch(showError);
      });
      $(name + "-prev").addEventListener("click", () => {
        if (v.pages.length > 1) v.pages.pop();
        load().catch(showError);
      });
    }
    if (canMutate()) {
      $("replay-selected").addEventListener("click", () => replay([...state.dead.selected]));
      $("delete-selected").addEventListener("click", () => remove([...state.dead.selected]));
      $("replay-all").addEventListener("click", replayAll);
      $("pause-form").addEventListener("submit", (e) => { e.preventDefault(); pause(e.target); });
      $("dead-select-all").addEventListener("change", (e) => {
        for (const id of state.dead.ids) {
          if (e.target.checked) state.dead.selected.add(id); else state.dead.selected.delete(id);
        }
        for (const box of document.querySelectorAll("#dead-table tbody input[type=checkbox]")) box.checked = e.target.checked;
        updateDeadButtons();
      });
    }
  }

  async function start() {
    try {
      state.info = await api("");
    } catch (err) {
      showError(err);
      return;
    }
    document.title = state.info.title;
    $("title").textContent = state.info.title;
    const hash = new URLSearchParams(location.hash.slice(1));
    const names = state.info.sources.map((s) => s.name);
    state.source = names.includes(hash.get("source")) ? hash.get("source") : names[0];
    renderMode();
    renderSources();
    wire();
    const tab = hash.get("tab");
    await selectTab(tab === "events" || tab === "audit" ? tab : "dead");
    document.body.dataset.ready = "true";
  }

  start();
})();
