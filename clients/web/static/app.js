/* Narratoria web page: plain JS, no build step, nothing loaded from elsewhere.
 * Talks only to the gateway's /api (which talks to the daemon). */
"use strict";

(function () {
  // ---------------------------------------------------------------- helpers
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  const DASH = "\u2014";

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }

  function toast(message, bad) {
    const box = $("#toast");
    box.textContent = message;
    box.className = "toast" + (bad ? " bad" : "");
    box.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { box.hidden = true; }, 5000);
  }

  class ApiError extends Error {
    constructor(status, doc) {
      const err = (doc && doc.error) || {};
      super(err.message || ("HTTP " + status));
      this.status = status;
      this.code = err.code || "";
      this.field = err.field || "";
      this.doc = doc;
    }
  }

  // The gateway refuses a request that changes anything unless it is JSON from this
  // page (fetch adds the Origin header), so every such request carries a JSON body.
  async function api(method, path, body) {
    const init = { method, headers: {}, credentials: "same-origin" };
    if (method !== "GET" && method !== "HEAD") {
      init.body = JSON.stringify(body === undefined ? {} : body);
      init.headers["Content-Type"] = "application/json";
    }
    const res = await fetch(path, init);
    if (res.status === 401) toast("This page needs the gateway's launch token: open the URL `narratoria web` printed.", true);
    let doc = null;
    const type = res.headers.get("Content-Type") || "";
    if (type.includes("json")) doc = await res.json();
    if (res.status === 503 && doc && doc.waiting) daemonWaiting();
    if (!res.ok && !(doc && res.status === 422)) throw new ApiError(res.status, doc);
    return doc;
  }

  // A number, or null for anything missing or not a finite number
  // (docs/state.md, "Missing or invalid values").
  function num(value) {
    if (typeof value === "number" && Number.isFinite(value)) return value;
    if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) return Number(value);
    return null;
  }

  function getPath(tree, path) {
    let node = tree;
    for (const part of String(path).split(".")) {
      if (node === null || typeof node !== "object" || !(part in node)) return undefined;
      node = node[part];
    }
    return node;
  }

  function merge(target, patch) {
    if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
    const out = (target && typeof target === "object" && !Array.isArray(target)) ? target : {};
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete out[k];
      else out[k] = merge(out[k], v);
    }
    return out;
  }

  function text(value) {
    if (value === null || value === undefined || value === "") return DASH;
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  function humanize(id) {
    return String(id || "").replace(/[_-]+/g, " ").replace(/\b\w/g, c => c.toUpperCase());
  }

  function assetUrl(path) {
    if (!path || !S.sid || String(path).startsWith("default:")) return "";
    return "/api/sessions/" + encodeURIComponent(S.sid) + "/assets/" +
      String(path).split("/").map(encodeURIComponent).join("/");
  }

  // ---------------------------------------------------------------- state
  const S = {
    sid: localStorage.getItem("narratoria.session") || "",
    view: null,          // the session view (state without hidden stats, stat definitions, icons...)
    state: {},           // view.state, patched live by state_patch events
    shown: {},           // path -> last number rendered
    turnStart: {},       // path -> its number when the turn began (to mark changes)
    choices: [],
    busy: false,
    campaigns: [],
    assetsSeen: [],
  };

  // ---------------------------------------------------------------- waiting for the daemon
  // The gateway answers 503 {"waiting": true} while it has no daemon (still loading, or
  // restarting): the banner shows, /api/health is polled, and once the daemon is back
  // the banner goes and what the page shows is loaded again. No reload needed.
  const WAIT_POLL_MS = 1500;
  const IDLE_POLL_MS = 5000;
  let daemonAway = false;

  function daemonWaiting() {
    $("#daemon-wait").hidden = false;
    const badge = $("#daemon-status");
    badge.textContent = "waiting for the daemon";
    badge.className = "daemon-status bad";
    daemonAway = true;
  }

  // A turn whose stream (or start) failed because the daemon went away: a calm note
  // and the banner, not an error dump. True when that was the failure.
  function daemonLost(code, entry) {
    if (code !== "UNAVAILABLE") return false;
    daemonWaiting();
    entry.append(el("div", { class: "muted daemon-lost", text: "The daemon went away during this turn; the story resumes once it is back." }));
    return true;
  }

  async function daemonBack() {
    $("#daemon-wait").hidden = true;
    daemonAway = false;
    await daemonStatus();
    try { await loadCampaigns(); } catch (e) { /* shown by the view */ }
    route();
    if (S.sid) loadAssets();
  }

  async function watchDaemon() {
    let health = null;
    try {
      const res = await fetch("/api/health", { credentials: "same-origin", cache: "no-store" });
      if (res.ok) health = await res.json();
    } catch (e) { /* the gateway itself is away: try again */ }
    if (health && health.waiting) daemonWaiting();
    else if (health && daemonAway) await daemonBack();
    setTimeout(watchDaemon, daemonAway ? WAIT_POLL_MS : IDLE_POLL_MS);
  }

  // ---------------------------------------------------------------- routing
  function route() {
    const name = (location.hash.replace(/^#/, "").split("/")[0]) || "play";
    const known = ["play", "sessions", "characters", "skills"];
    const view = known.includes(name) ? name : "play";
    for (const v of known) $("#view-" + v).hidden = v !== view;
    $$("#nav a").forEach(a => a.classList.toggle("active", a.dataset.view === view));
    setMenu(false);
    if (view !== "play") setStateDrawer(false);
    $("#state-toggle").hidden = view !== "play" || !S.sid;
    if (view === "play") openPlay();
    if (view === "sessions") loadSessions();
    if (view === "characters") loadCharacters();
    if (view === "skills") loadSkills();
  }

  async function daemonStatus() {
    const badge = $("#daemon-status");
    try {
      const st = await api("GET", "/api/status");
      badge.textContent = "daemon " + (st.version || "up");
      badge.title = badge.textContent;
      badge.className = "daemon-status ok";
    } catch (e) {
      badge.textContent = "daemon unreachable";
      badge.title = e.message;
      badge.className = "daemon-status bad";
    }
  }

  // ---------------------------------------------------------------- play view
  async function openPlay() {
    $("#no-session").hidden = !!S.sid;
    $("#play").hidden = !S.sid;
    if (!S.sid) return;
    try {
      await refreshView(true);
    } catch (e) {
      if (e.status === 404) {
        S.sid = "";
        localStorage.removeItem("narratoria.session");
        $("#no-session").hidden = false;
        $("#play").hidden = true;
        $("#state-toggle").hidden = true;
      }
      toast(e.message, true);
    }
  }

  async function refreshView(initial) {
    const sid = S.sid;
    const view = await api("GET", "/api/sessions/" + encodeURIComponent(sid) + "/view");
    if (sid !== S.sid) return;
    S.view = view;
    S.state = (view && typeof view.state === "object" && view.state) || {};
    $("#story-title").textContent = campaignTitle(view.campaign) || "A story";
    $("#story-meta").textContent = "session " + sid + " \u00b7 turn " + (view.turns || 0);
    $("#free-text").hidden = !view.free_text;
    if (initial) {
      const story = $("#story");
      story.textContent = "";
      if (view.last_narration) {
        story.append(el("article", { class: "entry", dataset: { scene: String(view.turns || 0) } },
          el("div", { class: "narration", text: view.last_narration })));
      } else {
        const camp = S.campaigns.find(c => c.id === view.campaign);
        story.append(el("article", { class: "entry intro" },
          el("div", { class: "narration", text: (camp && camp.description) || "A new story begins." })));
      }
      S.shown = {};
      S.turnStart = {};
      setChoices(view.choices || []);
    }
    renderState();
    renderGallery();
    renderRetryButtons();
  }

  function campaignTitle(id) {
    const c = S.campaigns.find(c => c.id === id);
    return c ? c.title : humanize(id);
  }

  function setChoices(options) {
    S.choices = Array.isArray(options) ? options.slice(0, 4) : [];
    const box = $("#choices");
    box.textContent = "";
    if (!S.choices.length) {
      // Nothing on offer yet (a new story): one way in.
      box.append(el("button", { type: "button", class: "choice begin", onclick: () => playTurn({ text: "look around" }),
        disabled: S.busy }, "Begin: look around"));
      return;
    }
    S.choices.forEach((option, i) => {
      box.append(el("button", {
        type: "button", class: "choice", dataset: { choice: String(i + 1) }, disabled: S.busy,
        onclick: () => playTurn({ choice: i + 1 }),
      }, el("kbd", {}, String(i + 1)), el("span", { class: "choice-text" }, option)));
    });
  }

  function setBusy(busy, label) {
    S.busy = busy;
    $$("#choices button").forEach(b => { b.disabled = busy; });
    $("#free-text-input").disabled = busy;
    $("#cancel-turn").hidden = !busy;
    $("#turn-status").textContent = label || "";
    delete $("#turn-status").dataset.queued;
    document.body.classList.toggle("busy", busy);
  }

  // ---------------------------------------------------------------- a turn
  // Tools of the turn: id -> {path, status, logs, started, ms, attempt}
  let tools = {};
  let turnNotes = [];

  async function playTurn(body) {
    if (S.busy || !S.sid) return false;
    const sid = S.sid;
    setBusy(true, "The story is being told\u2026");
    turnPhase = "The story is being told\u2026";
    tools = {};
    turnNotes = [];
    S.turnStart = Object.assign({}, S.shown);
    renderTools();
    const entry = el("article", { class: "entry current" });
    const said = body.choice ? (S.choices[body.choice - 1] || ("choice " + body.choice)) : body.text;
    if (said) entry.append(el("div", { class: "player-input", text: "\u203a " + said }));
    const narration = el("div", { class: "narration" });
    entry.append(narration);
    const story = $("#story");
    $$(".entry.current", story).forEach(e => e.classList.remove("current"));
    story.append(entry);
    let done = false;
    try {
      const res = await fetch("/api/sessions/" + encodeURIComponent(sid) + "/turn", {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "Accept": "text/event-stream" },
        body: JSON.stringify(body),
      });
      if (!res.ok) {
        let doc = null;
        try { doc = await res.json(); } catch (e) { /* not JSON */ }
        throw new ApiError(res.status, doc);
      }
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done: end } = await reader.read();
        if (end) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const ev = parseFrame(frame);
          if (!ev) continue;
          if (ev.kind === "done") done = true;
          onEvent(ev, entry, narration);
          story.scrollTop = story.scrollHeight;
        }
      }
    } catch (e) {
      if (!daemonLost(e.doc && e.doc.waiting ? "UNAVAILABLE" : "", entry)) {
        entry.append(el("div", { class: "error", text: "The turn failed: " + e.message }));
        toast(e.message, true);
      }
    } finally {
      if (sid === S.sid) {
        try { await refreshView(false); } catch (e) { /* shown on the next try */ }
        if (done) markScene(entry, body);
        try { await loadAssets(); } catch (e) { /* gallery stays as it was */ }
      }
      setBusy(false, done ? "" : "The turn did not finish.");
      setChoices(S.choices);
    }
    return done;
  }

  // ---------------------------------------------------------------- retry: a new take
  // Each played scene's entry carries its number and, when this page played it, its input.
  // A retry is the daemon's Branch at that scene (the old session is kept: Sessions lists
  // it) and, when the page knows the input, that input played again.
  function markScene(entry, body) {
    entry.dataset.scene = String((S.view && S.view.turns) || 0);
    entry.dataset.input = JSON.stringify(body);
    renderRetryButtons();
  }

  function renderRetryButtons() {
    const last = (S.view && S.view.turns) || 0;
    $$("#story .entry[data-scene]").forEach(entry => {
      $$(".retry", entry).forEach(b => b.remove());
      const scene = Number(entry.dataset.scene);
      if (!(scene >= 1 && scene <= last)) return;
      entry.append(el("button", {
        type: "button", class: "retry secondary", dataset: { retryScene: String(scene) },
        title: "Play scene " + scene + " again as a new take (this one is kept)",
        onclick: () => retryScene(scene),
      }, scene === last ? "Retry" : "Retry from here"));
    });
  }

  async function retryScene(scene) {
    if (S.busy || !S.sid) return;
    const old = S.sid;
    const entry = $$("#story .entry[data-scene]").find(e => Number(e.dataset.scene) === scene);
    const body = entry && entry.dataset.input ? JSON.parse(entry.dataset.input) : null;
    let take;
    try {
      take = await api("POST", "/api/sessions/" + encodeURIComponent(old) + "/branch", { at_scene: scene });
    } catch (e) { toast(e.message, true); return; }
    // The story up to the scene stays on screen; the scene and what followed go.
    $$("#story .entry").forEach(e => {
      if (!e.dataset.scene || Number(e.dataset.scene) >= scene) e.remove();
    });
    S.sid = take.id;
    localStorage.setItem("narratoria.session", take.id);
    toast("Scene " + scene + " again, as a new take: session " + take.id +
      " (the old take, " + old + ", is kept under Sessions)");
    await refreshView(false);
    const story = $("#story");
    if (!story.children.length && S.view.last_narration) {
      story.append(el("article", { class: "entry", dataset: { scene: String(S.view.turns || 0) } },
        el("div", { class: "narration", text: S.view.last_narration })));
    }
    setChoices(S.view.choices || []);
    renderRetryButtons();
    if (body) await playTurn(body);
  }

  function parseFrame(frame) {
    let data = "";
    for (const line of frame.split("\n")) {
      if (line.startsWith("data:")) data += line.slice(5).trimStart();
    }
    if (!data) return null;
    try { return JSON.parse(data); } catch (e) { return null; }
  }

  // The turn's place in the model's queue ("queued" events: one when the wait starts and
  // one per change); any other event means the model has taken the request.
  let turnPhase = "";

  function showQueued(q) {
    const status = $("#turn-status");
    if (!q) {
      if (status.dataset.queued) status.textContent = turnPhase;
      delete status.dataset.queued;
      return;
    }
    status.dataset.queued = String(q.position || 0);
    status.textContent = "Waiting for the model: position " + (q.position || "?") +
      (q.wait_s >= 1 ? " (" + Math.round(q.wait_s) + " s)" : "") + "\u2026";
  }

  function onEvent(ev, entry, narration) {
    if (ev.kind !== "queued") showQueued(null);
    switch (ev.kind) {
      case "queued": showQueued(ev.queued || {}); break;
      case "narration":
        narration.append(document.createTextNode((ev.narration && ev.narration.text) || ""));
        break;
      case "phase":
        turnPhase = phaseLabel(ev.phase && ev.phase.phase);
        $("#turn-status").textContent = turnPhase;
        break;
      case "plan": {
        const list = (ev.plan && Array.isArray(ev.plan.tools)) ? ev.plan.tools : [];
        for (const t of list) {
          if (!t || !t.toolId) continue;
          if (!tools[t.toolId] || tools[t.toolId].status !== "running")
            tools[t.toolId] = Object.assign(tools[t.toolId] || { logs: [] },
              { id: t.toolId, path: t.toolPath || "", status: "pending" });
        }
        turnNotes.push({ kind: "plan", text: "Plan (attempt " + (ev.plan.attempt || 1) + ", " +
          (ev.plan.planner || "?") + " planner, " + (ev.plan.generation_ms || 0) + " ms): " +
          (list.map(t => t.toolPath || t.toolId).join(", ") || "no tools") });
        renderTools();
        break;
      }
      case "tool_started": {
        const t = ev.tool_started;
        tools[t.tool_id] = Object.assign(tools[t.tool_id] || { logs: [] },
          { id: t.tool_id, path: t.tool_path, status: "running", attempt: t.attempt || 0, startedAt: ev.at_ms });
        renderTools();
        break;
      }
      case "tool_event": onToolEvent(ev.tool_event, entry); break;
      case "tool_finished": {
        const t = ev.tool_finished;
        const tool = tools[t.tool_id] = Object.assign(tools[t.tool_id] || { logs: [], id: t.tool_id }, {
          status: t.ok ? "completed" : "failed", ms: t.duration_ms, error: t.error || "",
          summary: t.summary || "",
        });
        if (!tool.path) tool.path = "";
        renderTools();
        break;
      }
      case "replan": {
        const r = ev.replan;
        turnNotes.push({ kind: "replan", text: "Replan after attempt " + (r.attempt || 1) + ": " + (r.reason || "") +
          (r.failed_tools && r.failed_tools.length ? " (failed: " + r.failed_tools.join(", ") + ")" : "") +
          (r.disabled_skills && r.disabled_skills.length ? " (disabled: " + r.disabled_skills.join(", ") + ")" : "") });
        renderTools();
        break;
      }
      case "fallback": {
        const f = ev.fallback;
        turnNotes.push({ kind: "fallback", text: "Fallback after " + (f.attempts || 0) + " attempts: " + (f.reason || "") });
        entry.classList.add("fallback");
        renderTools();
        break;
      }
      case "log": {
        const l = ev.log || {};
        turnNotes.push({ kind: "log " + (l.level || "info"), text: (l.source ? l.source + ": " : "") + (l.message || "") });
        renderTools();
        break;
      }
      case "check": entry.append(renderCheck(ev.check || {})); break;
      case "choices": setChoices((ev.choices && ev.choices.options) || []); break;
      case "done": {
        const d = ev.done || {};
        const timings = d.timings_ms || {};
        turnNotes.push({ kind: "done", text: "Turn " + (d.turn_number || "?") + " " + (d.outcome || "done") +
          (timings.total !== undefined ? " in " + timings.total + " ms" : "") +
          " (" + Object.entries(timings).filter(([k]) => k !== "total").map(([k, v]) => k + " " + v + " ms").join(", ") + ")" });
        if (!narration.textContent && d.narration) narration.textContent = d.narration;
        renderTools();
        break;
      }
      case "error":
        if (daemonLost(ev.code, entry)) break;
        entry.append(el("div", { class: "error", text: (ev.code ? ev.code + ": " : "") + (ev.message || "error") }));
        break;
      default: break; // started, knowledge, end: nothing to show
    }
  }

  function phaseLabel(phase) {
    const labels = { GENERATING: "Planning\u2026", EXECUTING: "Running the skills\u2026", REPLANNING: "Replanning\u2026",
      FALLBACK: "Falling back\u2026", NARRATING: "Narrating\u2026", CHOOSING: "Choosing what next\u2026", STORING: "Saving\u2026" };
    return labels[phase] || (phase ? humanize(String(phase).toLowerCase()) + "\u2026" : "");
  }

  function onToolEvent(te, entry) {
    const tool = tools[te.tool_id] = tools[te.tool_id] || { id: te.tool_id, path: "", status: "running", logs: [] };
    const event = te.event || {};
    const type = te.type || event.type;
    if (type === "log") {
      tool.logs.push({ level: event.level || "info", message: event.message || "", at: te.at_ms });
    } else if (type === "error") {
      tool.logs.push({ level: "error", message: (event.error && event.error.message) || event.message || JSON.stringify(event) });
    } else if (type === "state_patch") {
      S.state = merge(S.state, event.patch || {});
      renderState();
    } else if (type === "asset") {
      S.assetsSeen.push(event);
      renderGallery();
    } else if (type === "ui_event") {
      entry.append(renderUiEvent(event.event, event.payload, te.tool_id));
    }
    renderTools();
  }

  function renderUiEvent(name, payload, toolId) {
    if (name === "dice_roll") return renderDice(payload || {});
    if (name === "narrative_choice") {
      const options = ((payload && payload.options) || []).map(o => (typeof o === "string" ? o : (o && (o.text || o.label)) || ""));
      if (options.filter(Boolean).length) setChoices(options.filter(Boolean));
      return document.createDocumentFragment();
    }
    // Not something this page knows how to draw: say so, show what came.
    return el("div", { class: "ui-placeholder" },
      el("div", { class: "ui-name" }, "ui_event ", el("code", {}, String(name || "?")), toolId ? " from " + toolId : "", " (not supported by this page)"),
      el("pre", { text: JSON.stringify(payload === undefined ? null : payload, null, 2) }));
  }

  function renderDice(p) {
    const card = el("div", { class: "dice-roll" });
    card.append(el("span", { class: "dice-icon", "aria-hidden": "true" }, "\u2684"));
    card.append(el("strong", {}, text(p.formula)));
    const faces = el("span", { class: "dice-faces" });
    for (const d of Array.isArray(p.dice) ? p.dice : []) {
      const kept = Array.isArray(d.kept) ? d.kept.slice() : [];
      for (const face of Array.isArray(d.rolls) ? d.rolls : []) {
        const i = kept.indexOf(face);
        if (i >= 0) kept.splice(i, 1);
        faces.append(el("span", { class: "die" + (i >= 0 ? "" : " dropped") }, text(face)));
      }
    }
    card.append(faces);
    const mod = num(p.modifier);
    if (mod) card.append(el("span", { class: "muted" }, (mod > 0 ? "+" : "") + mod));
    card.append(el("span", { class: "dice-total" }, "= " + text(p.total)));
    if (p.outcomeLabel || p.outcome) card.append(el("span", { class: "badge" }, text(p.outcomeLabel || p.outcome)));
    if (p.reason) card.append(el("span", { class: "muted dice-reason" }, p.reason));
    return card;
  }

  // A risky action the engine resolved: what was rolled against what, and its cost.
  function renderCheck(c) {
    const card = el("div", { class: "dice-roll check" });
    card.append(el("span", { class: "dice-icon", "aria-hidden": "true" }, "\u2696"));
    card.append(el("strong", {}, (c.stat ? humanize(String(c.stat)) + " check" : "Check")));
    const mod = num(c.modifier);
    card.append(el("span", { class: "muted" }, text(c.formula || "2d6") + " " + text(c.roll) +
      (mod ? (mod > 0 ? " +" : " ") + mod : "")));
    card.append(el("span", { class: "dice-total" }, "= " + text(c.total) + " vs " + text(c.difficulty)));
    if (c.outcome) card.append(el("span", { class: "badge" }, text(c.outcome)));
    if (c.cost && c.cost !== "none") card.append(el("span", { class: "muted dice-reason" }, "cost: " + c.cost));
    return card;
  }

  // Diagnostics: what authors and debugging read, not players. The turn's own log lines
  // (the narrator's grounding report, name fixes, plot and state notes), the plan and
  // timing notes, and a skill's debug and warning lines. What a skill did (its status,
  // summary, info and error lines) and a replan or fallback stay in view.
  const DIAG_KEY = "narratoria.diagnostics";
  const PLAYER_NOTES = ["replan", "fallback"];

  function diagnosticLog(level) {
    return level === "debug" || level === "warn" || level === "warning";
  }

  function diagnosticNote(kind) {
    return !PLAYER_NOTES.includes(String(kind).split(" ")[0]);
  }

  function diagnosticsShown() {
    return localStorage.getItem(DIAG_KEY) === "1";
  }

  function updateDiagToggle() {
    const shown = diagnosticsShown();
    const count = $$("#tools .diag").length;
    $("#tools").classList.toggle("show-diag", shown);
    const button = $("#diag-toggle");
    button.textContent = (shown ? "Hide" : "Show") + " diagnostics (" + count + ")";
    button.setAttribute("aria-pressed", String(shown));
    const ran = Object.keys(tools).length;
    $("#tools-count").textContent = ran ? "(" + ran + ")" : "";
  }

  function toggleDiagnostics() {
    localStorage.setItem(DIAG_KEY, diagnosticsShown() ? "0" : "1");
    updateDiagToggle();
  }

  function renderTools() {
    const box = $("#tools");
    box.textContent = "";
    const ids = Object.keys(tools);
    if (!ids.length) {
      box.append(el("p", { class: "muted" }, S.busy ? "Waiting for a plan\u2026" : "No tools ran in this turn."));
    }
    for (const id of ids) {
      const t = tools[id];
      const row = el("div", { class: "tool " + t.status, dataset: { tool: id, status: t.status } },
        el("div", { class: "tool-head" },
          el("span", { class: "tool-status " + t.status }, t.status),
          el("strong", {}, id), t.path ? el("code", {}, t.path) : null,
          t.attempt ? el("span", { class: "muted" }, "attempt " + (t.attempt + 1)) : null,
          t.ms !== undefined ? el("span", { class: "muted tool-ms" }, t.ms + " ms") : null),
        t.summary ? el("div", { class: "tool-summary" }, t.summary) : null,
        t.error ? el("div", { class: "error" }, t.error) : null,
        t.logs.length ? el("ul", { class: "tool-logs" }, t.logs.map(l =>
          el("li", { class: "log-" + l.level + (diagnosticLog(l.level) ? " diag" : "") },
            el("span", { class: "muted" }, l.level), " ", l.message))) : null);
      box.append(row);
    }
    for (const n of turnNotes) {
      box.append(el("div", { class: "turn-note " + n.kind + (diagnosticNote(n.kind) ? " diag" : "") }, n.text));
    }
    updateDiagToggle();
  }

  // ---------------------------------------------------------------- state panel
  const DEFAULT_ICONS = { stat: "\u25C6", item: "\u25A3", location: "\u2302", time: "\u25F7", npc: "\u263A" };

  function icon(path, kind) {
    const icons = (S.view && S.view.icons) || {};
    const ref = icons[path];
    if (ref && !String(ref).startsWith("default:")) {
      return el("img", { class: "icon", src: assetUrl(ref), alt: "", loading: "lazy", onerror: (e) => { e.target.replaceWith(el("span", { class: "icon glyph" }, DEFAULT_ICONS[kind] || "\u25C6")); } });
    }
    const which = ref ? String(ref).slice("default:".length) : kind;
    return el("span", { class: "icon glyph", "aria-hidden": "true" }, DEFAULT_ICONS[which] || DEFAULT_ICONS[kind] || "\u25C6");
  }

  function renderState() {
    try { drawState(); } finally {
      // On a phone the panel is behind the State button: the button says a stat changed.
      $("#state-toggle").classList.toggle("has-change", !!$("#state .stat.changed"));
    }
  }

  function drawState() {
    const box = $("#state");
    box.textContent = "";
    const view = S.view || {};
    const state = S.state || {};
    const world = (state.world && typeof state.world === "object") ? state.world : {};
    box.append(el("div", { class: "where" },
      el("div", { class: "kv", dataset: { path: "world.location" } }, icon("world.location", "location"),
        el("span", { class: "k" }, "Location"), el("span", { class: "v" }, humanizeValue(world.location))),
      el("div", { class: "kv", dataset: { path: "world.time" } }, icon("world.time", "time"),
        el("span", { class: "k" }, "Time"), el("span", { class: "v" }, timeText(world.time)))));

    const stats = Array.isArray(view.stats) ? view.stats.filter(s => s && s.path && s.display !== "hidden" && !s.hidden) : [];
    const groups = {};
    for (const s of stats) (groups[s.category || "general"] = groups[s.category || "general"] || []).push(s);
    for (const [category, list] of Object.entries(groups)) {
      const group = el("div", { class: "stat-group" }, el("h3", {}, humanize(category)));
      for (const s of list) group.append(renderStat(s, getPath(state, s.path)));
      box.append(group);
    }
    if (!stats.length) box.append(el("p", { class: "muted" }, "No stats to show."));

    box.append(el("h3", {}, "Inventory"));
    const inv = Array.isArray(view.inventory) ? view.inventory : [];
    if (!inv.length) box.append(el("p", { class: "muted" }, "Nothing carried."));
    else box.append(el("ul", { class: "inventory" }, inv.map(item => {
      item = item || {};
      const qty = num(item.quantity);
      return el("li", { title: item.description || "" }, icon("player.inventory." + item.id, "item"),
        el("span", {}, item.name || humanize(item.id) || DASH),
        qty !== null && qty !== 1 ? el("span", { class: "qty" }, "\u00d7" + qty) : null,
        item.type ? el("span", { class: "muted" }, item.type) : null);
    })));

    const npcs = Array.isArray(view.npcs) ? view.npcs : [];
    if (npcs.length) {
      box.append(el("h3", {}, "People"));
      for (const n of npcs) {
        if (!n) continue;
        // Live from state_patch when the daemon names the stat the meter comes from.
        const live = n.stat ? getPath(state, n.stat) : undefined;
        const rel = num(live !== undefined ? live : n.relationship);
        const min = num(n.min) ?? 0, max = num(n.max) ?? 10;
        const portrait = n.portrait ? el("img", { class: "npc-portrait", src: assetUrl(n.portrait), alt: "" }) :
          el("span", { class: "npc-portrait glyph" }, DEFAULT_ICONS.npc);
        box.append(el("div", { class: "npc", dataset: { npc: n.id || "" } }, portrait,
          el("div", { class: "npc-body" }, el("div", {}, n.name || humanize(n.id) || DASH),
            rel === null ? el("span", { class: "v missing" }, DASH) : meter(rel, min, max, "relationship"))));
      }
    }
  }

  function humanizeValue(value) {
    if (value === undefined || value === null || value === "") return DASH;
    if (typeof value === "object") return value.name || value.label || value.id || DASH;
    return /^[a-z0-9_]+$/.test(String(value)) ? humanize(value) : String(value);
  }

  function timeText(value) {
    if (value === undefined || value === null || value === "") return DASH;
    if (typeof value === "object") {
      const parts = ["day", "phase", "hour", "label", "name"].filter(k => value[k] !== undefined && value[k] !== null).map(k => (k === "day" ? "Day " : "") + humanizeValue(value[k]));
      return parts.join(", ") || DASH;
    }
    return humanizeValue(value);
  }

  function meter(value, min, max, cls) {
    const pct = max > min ? Math.max(0, Math.min(100, (value - min) / (max - min) * 100)) : 0;
    const bar = el("span", { class: "bar " + (cls || "") }, el("span", { class: "fill" }));
    bar.firstChild.style.width = pct + "%";
    return el("span", { class: "meter" }, bar, el("span", { class: "v" }, String(value)));
  }

  function renderStat(def, raw) {
    const value = num(raw);
    const min = num(def.min) ?? 0;
    let max = num(def.max);
    if (max === null || max <= min) max = min + 10;
    const display = def.display || "number";
    const row = el("div", { class: "stat display-" + display, dataset: { path: def.path, display }, title: def.description || "" },
      icon(def.path, "stat"), el("span", { class: "k" }, def.name || humanize(def.id)));
    if (value === null) {
      if (raw !== undefined && raw !== null) console.warn("state value is not a number", def.path, raw);
      row.append(el("span", { class: "v missing" }, DASH));
      return row;
    }
    // A change is marked against the value before this turn, until the next turn.
    const before = S.turnStart[def.path];
    S.shown[def.path] = value;
    const clamped = Math.max(min, Math.min(max, value));
    let widget;
    if (display === "bar") widget = meter(value, min, max, "stat-bar");
    else if (display === "hearts" || display === "pips") {
      const slots = max - min;
      const count = slots <= 20 ? slots : 10;
      const filled = Math.round((clamped - min) / (max - min) * count);
      const on = display === "hearts" ? "\u2665" : "\u25CF", off = display === "hearts" ? "\u2661" : "\u25CB";
      widget = el("span", { class: display, "aria-label": value + " of " + max },
        Array.from({ length: count }, (_, i) => el("span", { class: i < filled ? "on" : "off" }, i < filled ? on : off)),
        el("span", { class: "v" }, String(value)));
    } else if (display === "ring") {
      const r = 14, c = 2 * Math.PI * r, frac = (clamped - min) / (max - min);
      const ring = svg("svg", { viewBox: "0 0 36 36", class: "ring", width: "36", height: "36", "aria-hidden": "true" });
      ring.append(svg("circle", { cx: "18", cy: "18", r: String(r), class: "ring-bg" }));
      ring.append(svg("circle", { cx: "18", cy: "18", r: String(r), class: "ring-fg",
        "stroke-dasharray": (frac * c).toFixed(2) + " " + c.toFixed(2), transform: "rotate(-90 18 18)" }));
      widget = el("span", { class: "ring-box" }, ring, el("span", { class: "v" }, String(value)));
    } else {
      widget = el("span", { class: "v big" }, String(value));
    }
    row.append(widget);
    if (before !== undefined && before !== value) {
      const delta = value - before;
      row.classList.add("changed");
      row.append(el("span", { class: "delta " + (delta > 0 ? "up" : "down") }, (delta > 0 ? "+" : "") + delta));
    }
    return row;
  }

  // ---------------------------------------------------------------- gallery
  let assetList = [];

  async function loadAssets() {
    if (!S.sid) return;
    try {
      const doc = await api("GET", "/api/sessions/" + encodeURIComponent(S.sid) + "/assets");
      assetList = (doc && doc.assets) || [];
    } catch (e) {
      assetList = [];
    }
    renderGallery();
  }

  function renderGallery() {
    const box = $("#gallery");
    box.textContent = "";
    const shown = new Set();
    const items = [];
    for (const a of assetList) {
      shown.add(a.path);
      // The campaign's UI icons are drawn in the state panel, not the gallery.
      if (!String(a.path).startsWith("campaign/ui/")) items.push(a);
    }
    // asset events of this session's turns the daemon does not list (yet): labelled.
    for (const ev of S.assetsSeen) {
      if (!ev || shown.has(ev.path)) continue;
      items.push({ path: "", title: ev.assetId || ev.path || "asset", kind: ev.kind || "other", media_type: ev.mediaType || "", event: true });
    }
    if (!items.length) { box.append(el("p", { class: "muted" }, "No art or music yet.")); return; }
    for (const a of items) box.append(galleryItem(a));
  }

  function galleryItem(a) {
    const title = a.title || String(a.path).split("/").pop() || "asset";
    const type = a.media_type || "";
    const url = a.path ? assetUrl(a.path) : "";
    let media;
    if (url && (a.kind === "image" || type.startsWith("image/"))) media = el("img", { src: url, alt: title, loading: "lazy" });
    else if (url && (a.kind === "audio" || type.startsWith("audio/"))) media = el("audio", { controls: true, preload: "none", src: url });
    else media = el("div", { class: "placeholder" }, el("span", {}, (a.kind || "file").toUpperCase()), el("small", {}, type || "unknown type"));
    return el("figure", { class: "asset kind-" + (a.kind || "other"), dataset: { path: a.path || "" } }, media, el("figcaption", {}, title));
  }

  // ---------------------------------------------------------------- sessions
  async function loadCampaigns() {
    try {
      const doc = await api("GET", "/api/campaigns");
      S.campaigns = (doc && doc.campaigns) || [];
    } catch (e) { S.campaigns = []; }
    const sel = $("#start-campaign");
    sel.textContent = "";
    for (const c of S.campaigns) sel.append(el("option", { value: c.id }, c.title || c.id));
    const none = !S.campaigns.length;
    sel.hidden = none;
    $("#start-campaign-text").hidden = !none;
    showCampaignDesc();
  }

  function showCampaignDesc() {
    const c = S.campaigns.find(c => c.id === $("#start-campaign").value);
    $("#start-campaign-desc").textContent = c ? (c.description || "") : "";
  }

  async function loadSessions() {
    await loadCampaigns();
    await loadCharacterOptions();
    const box = $("#sessions-list");
    let sessions = [];
    try {
      sessions = (await api("GET", "/api/sessions" + ($("#sessions-all").checked ? "?all=1" : ""))).sessions || [];
    } catch (e) { box.textContent = e.message; return; }
    box.textContent = "";
    if (!sessions.length) { box.append(el("p", { class: "muted" }, "No playthroughs yet.")); return; }
    sessions.sort((a, b) => (b.updated_at_ms || 0) - (a.updated_at_ms || 0));
    for (const s of sessions) {
      const turns = num(s.turns) || 0;
      const scene = el("input", { type: "number", min: "1", max: String(Math.max(1, turns)), value: String(Math.max(1, turns)), class: "scene-input", "aria-label": "scene" });
      box.append(el("div", { class: "session-row", dataset: { session: s.id } },
        el("div", { class: "session-main" },
          el("strong", {}, s.title || campaignTitle(s.campaign) || "Untitled"),
          el("span", { class: "muted" }, " " + (s.campaign || "no campaign") + " \u00b7 " + turns + " turns \u00b7 " + (s.status || "") +
            (s.updated_at_ms ? " \u00b7 " + new Date(s.updated_at_ms).toLocaleString() : "") +
            (s.parent_session_id ? " \u00b7 branched from " + s.parent_session_id : "")),
          s.last_narration ? el("div", { class: "muted clip" }, s.last_narration.slice(0, 140)) : null),
        el("div", { class: "session-actions" },
          el("button", { type: "button", onclick: () => resume(s.id) }, "Resume"),
          turns ? el("span", { class: "rewind" }, "scene ", scene,
            el("button", { type: "button", class: "secondary", onclick: () => rewind(s.id, Number(scene.value)) }, "Rewind")) : null)));
    }
  }

  async function resume(id) {
    try { await api("POST", "/api/sessions/" + encodeURIComponent(id) + "/resume"); } catch (e) { /* GET fallback below */ }
    openSession(id);
  }

  async function rewind(id, scene) {
    try {
      const s = await api("POST", "/api/sessions/" + encodeURIComponent(id) + "/branch", { at_scene: scene });
      toast("Rewound: scene " + (s.branched_at_scene || scene) + " is next (the old playthrough is unchanged)");
      openSession(s.id);
    } catch (e) { toast(e.message, true); }
  }

  function openSession(id) {
    S.sid = id;
    S.assetsSeen = [];
    assetList = [];
    tools = {}; turnNotes = [];
    renderTools();  // another session's last turn is not this one's
    localStorage.setItem("narratoria.session", id);
    if (location.hash === "#play") route(); else location.hash = "#play";
    loadAssets();
  }

  async function startCampaign(ev) {
    ev.preventDefault();
    const form = ev.target;
    const campaign = S.campaigns.length ? $("#start-campaign").value : $("#start-campaign-text").value.trim();
    $("#start-status").textContent = "Starting (a campaign's first session reads it in: up to a minute)\u2026";
    form.querySelector("button[type=submit]").disabled = true;
    try {
      const s = await api("POST", "/api/sessions", { campaign, title: form.title.value, character_id: $("#start-character").value });
      $("#start-status").textContent = "";
      openSession(s.id);
    } catch (e) {
      $("#start-status").textContent = e.message;
    } finally {
      form.querySelector("button[type=submit]").disabled = false;
    }
  }

  // ---------------------------------------------------------------- characters
  let characters = [];

  async function fetchCharacters() {
    try { characters = (await api("GET", "/api/characters")).characters || []; }
    catch (e) { characters = []; throw e; }
    return characters;
  }

  async function loadCharacterOptions() {
    try { await fetchCharacters(); } catch (e) { return; }
    const sel = $("#start-character");
    const keep = sel.value;
    sel.textContent = "";
    sel.append(el("option", { value: "" }, "\u2014 the campaign's default \u2014"));
    for (const c of characters) sel.append(el("option", { value: c.id }, (c.name || c.id) + (c.fresh ? " (fresh)" : "")));
    sel.value = keep;
  }

  async function loadCharacters() {
    const box = $("#characters");
    try { await fetchCharacters(); } catch (e) { box.textContent = e.message; return; }
    box.textContent = "";
    if (!characters.length) box.append(el("p", { class: "muted" }, "No characters yet: create one above."));
    for (const c of characters) {
      const desc = String(c.description || "");
      const short = desc.length > 50 ? desc.slice(0, 50) + "\u2026" : desc;
      const used = Array.isArray(c.campaigns) ? c.campaigns : [];
      box.append(el("div", { class: "char-card", dataset: { character: c.id } },
        el("img", { class: "char-portrait", src: "/api/characters/" + encodeURIComponent(c.id) + "/portrait?v=" + (c.updated_at_ms || 0), alt: "portrait of " + (c.name || c.id),
          onerror: (e) => { e.target.replaceWith(el("div", { class: "char-portrait placeholder" }, "no portrait")); } }),
        el("div", { class: "char-body" },
          el("strong", {}, c.name || "Unnamed"),
          c.fresh ? el("span", { class: "badge fresh" }, "Fresh") :
            el("span", { class: "badge used" }, "Played in: " + (used.map(campaignTitle).join(", ") || DASH)),
          el("p", { class: "char-desc" }, short || DASH),
          el("div", {},
            el("button", { type: "button", class: "secondary", onclick: () => editCharacter(c) }, "Edit"), " ",
            el("button", { type: "button", class: "danger", onclick: () => deleteCharacter(c) }, "Delete")))));
    }
  }

  function editCharacter(c) {
    const form = $("#char-form");
    form.id.value = c.id;
    form.name.value = c.name || "";
    form.description.value = c.description || "";
    form.portrait.value = "";
    $("#char-form-title").textContent = "Edit " + (c.name || c.id);
    clearErrors(form);
    form.scrollIntoView({ behavior: "smooth" });
  }

  function resetCharacterForm() {
    const form = $("#char-form");
    form.reset();
    form.id.value = "";
    $("#char-form-title").textContent = "New character";
    clearErrors(form);
  }

  async function deleteCharacter(c) {
    if (!confirm("Delete " + (c.name || c.id) + "?")) return;
    try {
      await api("DELETE", "/api/characters/" + encodeURIComponent(c.id));
      toast("Deleted " + (c.name || c.id));
      loadCharacters();
    } catch (e) { toast(e.message, true); }
  }

  function clearErrors(form) {
    $$(".field-error", form).forEach(e => { e.textContent = ""; });
    $$(".invalid", form).forEach(e => e.classList.remove("invalid"));
  }

  function showFieldError(form, field, message) {
    const slot = $(".field-error[data-for='" + CSS.escape(field) + "']", form);
    if (!slot) return false;
    slot.textContent = message;
    const input = form.querySelector("[name='" + CSS.escape(field) + "']");
    if (input) input.classList.add("invalid");
    return true;
  }

  function fileBase64(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
  }

  async function saveCharacter(ev) {
    ev.preventDefault();
    const form = ev.target;
    clearErrors(form);
    const id = form.id.value;
    const data = { name: form.name.value, description: form.description.value };
    if (form.portrait.files.length) {
      try { data.portrait = await fileBase64(form.portrait.files[0]); }
      catch (e) { showFieldError(form, "portrait", "cannot read the file"); return; }
    }
    $("#char-status").textContent = "Saving\u2026";
    try {
      const c = await api("POST", "/api/characters" + (id ? "/" + encodeURIComponent(id) : ""), data);
      $("#char-status").textContent = "Saved " + (c.name || c.id) + ".";
      resetCharacterForm();
      loadCharacters();
    } catch (e) {
      $("#char-status").textContent = "";
      const message = e.message.replace(/^[a-z_]+: /, "");
      if (!(e.field && showFieldError(form, e.field, message))) $("#char-status").textContent = e.message;
    }
  }

  // ---------------------------------------------------------------- skills
  async function loadSkills() {
    const box = $("#skills");
    let skills;
    try { skills = (await api("GET", "/api/skills")).skills || []; }
    catch (e) { box.textContent = e.message; return; }
    box.textContent = "";
    for (const s of skills) {
      const card = el("div", { class: "panel skill", dataset: { skill: s.name } });
      const toggle = el("input", { type: "checkbox", class: "skill-enabled", "aria-label": "enabled" });
      toggle.checked = s.enabled !== false;
      toggle.addEventListener("change", async () => {
        try {
          const v = await api("POST", "/api/skills/" + encodeURIComponent(s.name) + "/enabled", { enabled: toggle.checked });
          toast(s.name + (v.enabled ? " enabled" : " disabled"));
        } catch (e) { toggle.checked = !toggle.checked; toast(e.message, true); }
      });
      // novalidate: the daemon validates, and its messages are shown by each field.
      const form = el("form", { class: "skill-form form-grid", hidden: true, novalidate: true });
      const more = el("button", { type: "button", class: "secondary" }, "Settings");
      more.addEventListener("click", async () => {
        if (!form.hidden) { form.hidden = true; return; }
        await loadSkillForm(s.name, form);
        form.hidden = false;
      });
      card.append(el("div", { class: "skill-head" },
        el("h3", {}, s.name), el("span", { class: "health " + (s.health || "") }, s.health || ""),
        el("label", { class: "switch" }, toggle, el("span", {}, "enabled")),
        s.has_settings === false ? null : more),
        el("p", { class: "muted skill-desc", title: s.description || "" }, s.description || ""), form);
      box.append(card);
    }
  }

  function fieldKind(f) {
    if (Array.isArray(f.enum) && f.enum.length) return "enum";
    if (f.type === "boolean") return "boolean";
    if (f.type === "number" || f.type === "integer") return "number";
    if (f.type === "string") return "string";
    return "json";
  }

  // A setting's key as words, for a schema without a title: "maxResults" -> "Max results".
  function humanizeKey(key) {
    const words = String(key || "").replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").trim().toLowerCase();
    return words.charAt(0).toUpperCase() + words.slice(1);
  }

  // What a value may be, in plain words ("1 to 120", "a whole number"): a small hint
  // beside the setting's title and description, never the schema's own terms.
  function fieldHint(f, kind) {
    const has = v => v !== null && v !== undefined;
    const parts = [];
    if (kind === "number") {
      if (has(f.minimum) && has(f.maximum)) parts.push(f.minimum + " to " + f.maximum);
      else if (has(f.minimum)) parts.push("at least " + f.minimum);
      else if (has(f.maximum)) parts.push("at most " + f.maximum);
      else parts.push(f.type === "integer" ? "a whole number" : "a number");
    } else if (kind === "json") {
      parts.push(f.type === "array" ? "a list, written as JSON" : "written as JSON");
    }
    if (has(f.default) && !f.sensitive && typeof f.default !== "object" && kind !== "boolean") parts.push("default " + f.default);
    if (f.required) parts.push("required");
    if (f.source === "env") parts.push("set from the environment");
    return parts.join(" \u00b7 ");
  }

  async function loadSkillForm(name, form) {
    form.textContent = "";
    let cfg;
    try { cfg = await api("GET", "/api/skills/" + encodeURIComponent(name) + "/config"); }
    catch (e) { form.append(el("p", { class: "error" }, e.message)); return; }
    const view = cfg.view || {};
    const fields = Array.isArray(view.fields) ? view.fields : [];
    if (!fields.length) form.append(el("p", { class: "muted" }, "This skill has no settings."));
    const initial = {};
    for (const f of fields) {
      const kind = fieldKind(f);
      const id = "cfg-" + name + "-" + f.name;
      let input;
      if (kind === "boolean") {
        input = el("input", { type: "checkbox", id, name: f.name });
        input.checked = f.value === true;
        initial[f.name] = input.checked;
      } else if (kind === "enum") {
        input = el("select", { id, name: f.name }, f.value === null || f.value === undefined ? el("option", { value: "" }, DASH) : null,
          f.enum.map(v => el("option", { value: String(v) }, String(v))));
        input.value = f.value === null || f.value === undefined ? "" : String(f.value);
        initial[f.name] = input.value;
      } else if (f.sensitive) {
        input = el("input", { type: "password", id, name: f.name, autocomplete: "new-password",
          placeholder: f.value ? "(set \u2014 leave empty to keep)" : "(not set)" });
        initial[f.name] = "";
      } else if (kind === "number") {
        input = el("input", { type: "number", id, name: f.name, step: f.type === "integer" ? "1" : "any",
          min: f.minimum ?? null, max: f.maximum ?? null });
        input.value = f.value === null || f.value === undefined ? "" : String(f.value);
        initial[f.name] = input.value;
      } else if (kind === "json") {
        input = el("textarea", { id, name: f.name, rows: "3", class: "json" });
        input.value = f.value === null || f.value === undefined ? "" : JSON.stringify(f.value);
        initial[f.name] = input.value;
      } else {
        input = el("input", { type: "text", id, name: f.name });
        input.value = f.value === null || f.value === undefined ? "" : String(f.value);
        initial[f.name] = input.value;
      }
      input.dataset.kind = kind;
      const hint = fieldHint(f, kind);
      const title = el("label", { for: id, class: "field-title" }, f.title || humanizeKey(f.name));
      form.append(el("div", { class: "field" + (kind === "boolean" ? " field-check" : ""), dataset: { field: f.name } },
        kind === "boolean" ? el("div", { class: "check-row" }, input, title) : title,
        f.description ? el("small", { class: "field-desc muted" }, f.description) : null,
        kind === "boolean" ? null : input,
        hint ? el("small", { class: "field-hint" }, hint) : null,
        el("span", { class: "field-error", dataset: { for: f.name } })));
    }
    if (fields.length) {
      const status = el("span", { class: "save-status muted" });
      form.append(el("div", {}, el("button", { type: "submit" }, "Save settings"), " ", status));
      form.onsubmit = async (ev) => {
        ev.preventDefault();
        clearErrors(form);
        status.textContent = "";
        const set = {};
        for (const input of $$("[name]", form)) {
          const kind = input.dataset.kind;
          const value = kind === "boolean" ? input.checked : input.value;
          if (value === initial[input.name]) continue;
          if (input.type === "password" && value === "") continue;
          set[input.name] = kind === "boolean" ? value : String(value);
        }
        if (!Object.keys(set).length) { status.textContent = "Nothing changed."; return; }
        try {
          const reply = await api("POST", "/api/skills/" + encodeURIComponent(name) + "/config", { set });
          if (reply && reply.saved === false) {
            let placed = false;
            for (const p of reply.problems || []) placed = showFieldError(form, p.field, p.message) || placed;
            status.textContent = placed ? "Not saved: fix the marked fields." : "Not saved: " + (reply.problems || []).map(p => p.field + ": " + p.message).join("; ");
            status.className = "save-status error";
            return;
          }
          status.textContent = "Saved \u2713";
          status.className = "save-status ok";
          for (const input of $$("[name]", form)) initial[input.name] = input.dataset.kind === "boolean" ? input.checked : (input.type === "password" ? "" : input.value);
        } catch (e) {
          if (e.field && showFieldError(form, e.field, e.message)) return;
          status.textContent = e.message;
          status.className = "save-status error";
        }
      };
    }
  }

  // ---------------------------------------------------------------- wiring
  document.addEventListener("keydown", (ev) => {
    if (ev.target && ["INPUT", "TEXTAREA", "SELECT"].includes(ev.target.tagName)) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if ($("#view-play").hidden || S.busy) return;
    const n = Number(ev.key);
    if (n >= 1 && n <= 4 && n <= S.choices.length) { ev.preventDefault(); playTurn({ choice: n }); }
  });

  $("#free-text").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = $("#free-text-input");
    const value = input.value.trim();
    if (!value) return;
    input.value = "";
    playTurn({ text: value });
  });
  $("#cancel-turn").addEventListener("click", async () => {
    try { await api("POST", "/api/sessions/" + encodeURIComponent(S.sid) + "/cancel"); }
    catch (e) { toast(e.message, true); }
  });
  // ---------------------------------------------------------------- phone layout
  // Below this width the page is story first: the menu holds the views and the daemon
  // badge, the state panel and gallery open as a drawer, the tools start folded.
  const PHONE = window.matchMedia("(max-width: 820px)");

  function setMenu(open) {
    document.body.classList.toggle("menu-open", open);
    $("#menu-toggle").setAttribute("aria-expanded", String(open));
  }

  function setStateDrawer(open) {
    document.body.classList.toggle("state-open", open);
    $("#state-toggle").setAttribute("aria-expanded", String(open));
    $("#drawer-backdrop").hidden = !open;
    if (open) setMenu(false);
  }

  $("#menu-toggle").addEventListener("click", () => setMenu(!document.body.classList.contains("menu-open")));
  $("#state-toggle").addEventListener("click", () => setStateDrawer(!document.body.classList.contains("state-open")));
  $("#state-close").addEventListener("click", () => setStateDrawer(false));
  $("#drawer-backdrop").addEventListener("click", () => setStateDrawer(false));
  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape") return;
    setStateDrawer(false);
    setMenu(false);
  });
  PHONE.addEventListener("change", () => { setStateDrawer(false); setMenu(false); });
  if (PHONE.matches) $("#tools-box").open = false;
  $("#diag-toggle").addEventListener("click", toggleDiagnostics);
  updateDiagToggle();

  $("#start-form").addEventListener("submit", startCampaign);
  $("#start-campaign").addEventListener("change", showCampaignDesc);
  $("#sessions-all").addEventListener("change", loadSessions);
  $("#char-form").addEventListener("submit", saveCharacter);
  $("#char-form-reset").addEventListener("click", resetCharacterForm);
  window.addEventListener("hashchange", route);

  // For scripts and tests: the page's own turn path (plan turns for authors included).
  window.narratoria = { playTurn, openSession, state: S };

  daemonStatus();
  watchDaemon();
  loadCampaigns().then(() => {
    if (!location.hash) location.hash = S.sid ? "#play" : "#sessions";
    else route();
    if (S.sid) loadAssets();
  });
})();
