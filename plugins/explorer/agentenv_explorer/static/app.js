// The explorer page: plain DOM, no build step, nothing loaded from elsewhere.
// Every stored value is put on the page with textContent (never innerHTML), so a prompt
// holding <script> shows as text. Routes are hash URLs, so links are stable and shareable:
//   #/runs?task_id=&eval=&run_group=&status=&outcome=&agent=&model=&since=&until=&offset=
//   #/run/<instance id>                                     one run, step by step
//   #/compare/<instance id>/<instance id>                   two runs side by side
//   #/groups, #/group/<run group id>                        run groups; one's pass@k matrix
//                                                           and plots
//   #/groups/compare/<group>/<group>                        two run groups compared by task
//   #/leaderboard/<eval id>                                 an eval's runs per agent x model
//   #/inbox, #/ask/<ask id>                                 what runs wait for a person to do:
//                                                           reviews to decide, prompts to a
//                                                           human agent to answer
"use strict";

const API = "/api/v1";
const PAGE = 50;

// the token arrived as ?token= and is now an HttpOnly cookie: drop it from the address bar
if (location.search.includes("token=")) {
  history.replaceState(null, "", location.pathname + location.hash);
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "text") node.textContent = String(v);
    else if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path) {
  const response = await fetch(API + path, { credentials: "same-origin" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// the page's proof that a state change comes from it (the server put it in the page)
function csrfToken() {
  return document.querySelector('meta[name="agentenv-csrf"]').getAttribute("content");
}
function enc(id) { return encodeURIComponent(id); }
function fmtScores(scores) {
  return Object.entries(scores || {}).map(([k, v]) => `${k}: ${v}`).join(", ");
}
function fmtSeconds(s) { return s === null || s === undefined ? "" : `${Number(s).toFixed(2)} s`; }

let refreshTimer = null;
let stream = null;
// run events, as runs happen (the explorer plugin's hook posts them; /events/stream passes
// them on): the page on show redraws when one concerns it, instead of on a timer
let onRunEvent = null;
let live = null;

function listen() {
  if (live) return;
  live = new EventSource(`${API}/events/stream`);
  live.addEventListener("ready", () => document.body.classList.add("live"));
  live.addEventListener("run", (message) => {
    const event = JSON.parse(message.data);
    if (onRunEvent) onRunEvent(event);
  });
  live.onerror = () => document.body.classList.remove("live");  // it reconnects by itself
}

// many events in a burst (a run's steps) make one redraw
function soon(fn) {
  let timer = null;
  return () => { if (!timer) timer = setTimeout(() => { timer = null; fn(); }, 250); };
}
// after starting a run, look again for a while: its record appears once the child has started
let pendingUntil = 0;

function route() {
  clearTimeout(refreshTimer);
  onRunEvent = null;
  listen();
  if (stream) { stream.close(); stream = null; }
  const hash = location.hash || "#/runs";
  const [path, query] = hash.slice(1).split("?");
  const parts = path.split("/").filter(Boolean);
  const main = document.getElementById("main");
  const show = (promise) => promise.catch((err) => {
    main.replaceChildren(el("p", { class: "error", text: "Error: " + err.message }));
  });
  if (parts[0] === "run" && parts[1]) return show(runPage(main, decodeURIComponent(parts[1])));
  if (parts[0] === "compare" && parts[2]) {
    return show(comparePage(main, decodeURIComponent(parts[1]), decodeURIComponent(parts[2])));
  }
  if (parts[0] === "groups" && parts[1] === "compare" && parts[3]) {
    return show(groupComparePage(main, decodeURIComponent(parts[2]), decodeURIComponent(parts[3])));
  }
  if (parts[0] === "groups") return show(groupsPage(main));
  if (parts[0] === "inbox") return show(inboxPage(main));
  if (parts[0] === "ask" && parts[1]) return show(askPage(main, decodeURIComponent(parts[1])));
  if (parts[0] === "leaderboard" && parts[1]) {
    return show(leaderboardPage(main, decodeURIComponent(parts[1]), new URLSearchParams(query || "")));
  }
  if (parts[0] === "group" && parts[1]) {
    return show(groupPage(main, decodeURIComponent(parts[1]), new URLSearchParams(query || "")));
  }
  return show(runsPage(main, new URLSearchParams(query || "")));
}

// -- the runs list ---------------------------------------------------------------------------

async function runsPage(main, params) {
  document.getElementById("where").textContent = "· runs";
  const offset = Number(params.get("offset") || 0);
  const query = new URLSearchParams();
  for (const name of ["task_id", "eval", "run_group", "status", "outcome", "agent", "model", "since", "until"]) {
    if (params.get(name)) query.set(name, params.get(name));
  }
  query.set("limit", PAGE);
  query.set("offset", offset);

  const field = (name, label, options) => {
    const input = options
      ? el("select", { name }, ...options.map((o) => el("option", { value: o, text: o || "any" })))
      : el("input", { name, value: params.get(name) || "", size: name === "task_id" ? 40 : 22 });
    if (options) input.value = params.get(name) || "";
    return el("label", {}, label, input);
  };
  const form = el("form", { class: "filters", id: "filters" },
    field("task_id", "task"),
    field("eval", "eval"),
    field("status", "status", ["", "running", "completed", "failed", "cancelled"]),
    field("outcome", "outcome", ["", "passed", "failed", "error", "cancelled", "scored below 1", "unscored"]),
    field("agent", "agent"),
    field("model", "model"),
    field("since", "started since (UTC)"),
    field("until", "started before (UTC)"),
    el("button", { type: "submit", text: "Filter" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) next.set(k, v);
    location.hash = "#/runs?" + next;
  });

  // kept across refreshes: what is ticked stays ticked while the rows update
  const selected = new Set();
  const compare = el("button", { id: "compare", text: "Compare 2 selected", disabled: "" });
  compare.addEventListener("click", () => {
    const [a, b] = [...selected];
    location.hash = `#/compare/${enc(a)}/${enc(b)}`;
  });
  const nav = (delta) => {
    const next = new URLSearchParams(params);
    next.set("offset", Math.max(0, offset + delta));
    return "#/runs?" + next;
  };
  const here = location.hash;

  async function draw() {
    const data = await api("/task-instances?" + query);
    if (location.hash !== here) return;  // the reader moved on while this page was asked for
    const rows = data.items.map((run) => {
      const box = el("input", { type: "checkbox", "aria-label": "select " + run.instance_id });
      box.checked = selected.has(run.instance_id);
      box.addEventListener("change", () => {
        if (box.checked) selected.add(run.instance_id); else selected.delete(run.instance_id);
        compare.disabled = selected.size !== 2;
      });
      return el("tr", { class: "run-row", "data-id": run.instance_id },
        el("td", {}, box),
        el("td", {}, el("a", { href: "#/run/" + enc(run.instance_id), text: run.instance_id })),
        el("td", { text: run.task_id }),
        el("td", { class: "status-" + run.status, text: run.status }),
        el("td", { class: "outcome-" + (run.outcome || "").replace(/ /g, "-"), text: run.outcome || "" }),
        el("td", { text: fmtScores(run.scores) }),
        el("td", { text: [...run.agents, ...run.models].join(", ") }),
        el("td", { text: run.started_at_utc }),
        el("td", { text: fmtSeconds(run.duration_seconds) }),
        el("td", { class: "error", text: run.error || "" }));
    });
    const table = el("table", { id: "runs" },
      el("thead", {}, el("tr", {}, ...["", "run", "task", "status", "outcome", "scores",
        "agent / model", "started (UTC)", "took", "first failure"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows));
    const pager = el("div", { class: "pager" },
      offset > 0 ? el("a", { href: nav(-PAGE), text: "« newer" }) : null,
      el("span", { id: "count", text: `${data.total} runs · ${offset + 1}-${offset + data.items.length}` }),
      data.has_more ? el("a", { href: nav(PAGE), text: "older »" }) : null,
      compare);
    results.replaceChildren(pager, table);  // the filter form (and what is typed in it) stays
    // live: look again (one cheap page) every 2 s while a run here is running or one was just
    // started, and every 10 s on the newest page, where new runs appear
    // run events redraw it as runs start and end; the timer is the fallback when the stream
    // is down (a run on another machine posts to no explorer here)
    const running = data.items.some((r) => r.status === "running") || Date.now() < pendingUntil;
    if (running || offset === 0) {
      refreshTimer = setTimeout(() => draw().catch(() => {}), running ? 2000 : 10000);
    }
  }
  const redraw = soon(() => { if (location.hash === here) draw().catch(() => {}); });
  onRunEvent = (event) => {
    if (event.kind === "run_started" || event.kind === "run_finished") redraw();
  };
  const results = el("div", { id: "results" });
  const overTime = el("div", { id: "over-time" });
  const filters = new URLSearchParams(query);
  filters.delete("limit"); filters.delete("offset");
  await draw();
  main.replaceChildren(form, overTime, results);
  api("/task-instances/outcomes?" + filters).then((data) => {
    if (location.hash === here) overTime.replaceChildren(outcomesPlot(data));
  }).catch(() => {});
}

const OUTCOME_COLOURS = { "passed": "#137333", "scored below 1": "#e3a008", "unscored": "#8a94a6",
  "failed": "#b3261e", "error": "#7b3fb5", "cancelled": "#c5cad3" };

// runs per day, stacked by outcome (the list's filters apply); its numbers a click away
function outcomesPlot(data) {
  if (!data.days.length) return el("p", { class: "note", text: "No run matches: nothing to plot." });
  const totals = data.days.map((d) => Object.values(d.counts).reduce((a, b) => a + b, 0));
  const { root, sx, sy } = frame(data.days.length, Math.max(1, ...totals), "day", "runs");
  const width = Math.max(1, (sx(1) - sx(0)) * 0.8);
  data.days.forEach((d, i) => {
    let base = 0;
    for (const outcome of data.outcomes) {
      const n = d.counts[outcome] || 0;
      if (!n) continue;
      root.append(svg("rect", { x: sx(i) + 1, y: sy(base + n), width, height: sy(base) - sy(base + n),
        fill: OUTCOME_COLOURS[outcome] || "#888", class: "bar", "data-day": d.day, "data-outcome": outcome, "data-value": n },
      svg("title", { text: `${d.day}: ${n} ${outcome}` })));
      base += n;
    }
  });
  return figure("plot-outcomes", `runs per day by outcome (the ${data.days.length} days to ${data.days[data.days.length - 1].day})`, root,
    ["day", ...data.outcomes], data.days.map((d) => [d.day, ...data.outcomes.map((o) => d.counts[o] || 0)]));
}

// -- one run ---------------------------------------------------------------------------------

function transcript(events) {
  return el("div", { class: "transcript" }, ...events.map((e) => {
    const type = e.type || "event";
    let body;
    if (type === "prompt") body = `prompt${e.model ? " → " + e.model : ""}\n${e.text || ""}`;
    else if (type === "agentenv.format") body = `transcript format ${e.format || "?"}`;
    else if (type === "tools") body = `tools offered: ${(e.tools || []).join(", ")}`;
    else if (type === "model_call") {
      const usage = e.usage ? ` · tokens in ${e.usage.input} out ${e.usage.output}` : "";
      const calls = (e.tool_calls || []).length ? `\ncalls: ${e.tool_calls.join(", ")}` : "";
      body = `model ${e.model || ""} (${e.finish_reason || ""})${usage}${calls}${e.text ? "\n" + e.text : ""}`;
    } else if (type === "tool_call") {
      body = `tool ${e.server ? e.server + "." : ""}${e.tool}(${JSON.stringify(e.arguments)})` +
        `${e.is_error ? " ERROR" : ""}\n→ ${typeof e.result === "string" ? e.result : JSON.stringify(e.result)}`;
    } else if (type === "answer") body = `final reply\n${e.text || ""}`;
    else if (type === "agentenv.usage" && e.usage) {
      body = `usage: ${e.usage.model_calls} model calls, ${e.usage.tool_calls} tool calls, ` +
        `tokens in ${e.usage.input} out ${e.usage.output}`;
    } else body = `${type}: ${JSON.stringify(e)}`;
    const node = el("div", { class: "event " + type.replace(/\W/g, "_"), text: body });
    // a tool's pictures (a browser's or desktop's screenshot), as images: data URLs of the
    // image types a browser shows, nothing else (the CSP allows data: images only)
    for (const image of Array.isArray(e.images) ? e.images : []) {
      if (!/^image\/(png|jpeg|gif|webp)$/.test(image.mime_type || "")) continue;
      node.append(el("img", { class: "shot", alt: `${e.tool || "tool"} image`,
                              src: `data:${image.mime_type};base64,${image.data}` }));
    }
    return node;
  }));
}

function trajectories(run) {
  const outputs = (run.context || {}).outputs || {};
  return Object.entries(outputs).filter(([, out]) => out && Array.isArray(out.trajectory));
}

// when each step started, relative to the run, and how long it took: a bar on the run's span
function timingsOf(run) {
  return Object.fromEntries((run.step_timings || []).map((t) => [t.step_id, t]));
}

function timeline(run, id, livesteps) {
  const timing = timingsOf(run)[id] || livesteps[id];
  if (!timing || !timing.started_at_utc) return el("td", {});
  const start = Date.parse(run.started_at_utc), at = Date.parse(timing.started_at_utc);
  const span = Math.max(1, (run.duration_seconds || 0) * 1000);
  const left = Math.min(100, Math.max(0, ((at - start) / span) * 100));
  const width = timing.duration_seconds === undefined ? 100 - left
    : Math.min(100 - left, Math.max(0.5, (timing.duration_seconds * 1000 / span) * 100));
  const bar = el("span", { class: "bar " + (timing.outcome || "running") });
  // through the CSSOM: the page's CSP refuses style attributes
  bar.style.marginLeft = `${left.toFixed(1)}%`;
  bar.style.width = `${width.toFixed(1)}%`;
  return el("td", { class: "timeline", title: `started +${((at - start) / 1000).toFixed(2)} s` }, bar);
}

function stepRows(run, livesteps) {
  const outputs = (run.context || {}).outputs || {};
  const verifications = ((run.context || {}).metadata || {}).verifications || {};
  const failed = new Map((run.failures || []).map((f) => [f.step_id, f]));
  const timings = timingsOf(run);
  // in the task's order when the record has timings; else completed first, then failures
  const ids = (run.step_timings || []).length ? (run.step_timings || []).map((t) => t.step_id)
    : [...(run.completed_steps || [])];
  for (const f of run.failures || []) if (!ids.includes(f.step_id)) ids.push(f.step_id);
  for (const id of Object.keys(livesteps)) if (!ids.includes(id)) ids.push(id);
  return ids.map((id, i) => {
    const failure = failed.get(id);
    const check = verifications[id];
    const timing = timings[id] || livesteps[id] || {};
    const result = failure ? `failed: ${failureText(failure)}`
      : timing.outcome === "running" ? "running" : timing.outcome === "failed" ? "failed" : "done";
    return el("tr", { class: "step", "data-step": id },
      el("td", { text: i + 1 }),
      el("td", { text: id }),
      el("td", { class: failure || timing.outcome === "failed" ? "error"
        : timing.outcome === "running" ? "status-running" : "outcome-passed", text: result }),
      el("td", { text: fmtSeconds(timing.duration_seconds ?? (failure ? failure.duration_seconds
        : (outputs[id] || {}).duration_seconds)) }),
      timeline(run, id, livesteps),
      el("td", { class: "checks", text: check ? `score ${check.score}` + (check.results || []).map((r) =>
        `\n${r.result ? "✓" : "✗"} ${r.criterion || r.type || ""}: ${r.justification || ""}`).join("") : "" }));
  });
}

async function runAgain(run) {
  const response = await fetch(`${API}/tasks/${enc(run.task_id)}/run`, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-AgentEnv-CSRF": csrfToken() },
    body: JSON.stringify(run.task_version ? { version: run.task_version } : {}) });
  const body = await response.json();
  if (!response.ok) { alert("Error: " + body.error); return; }
  pendingUntil = Date.now() + 20000;
  location.hash = "#/runs?task_id=" + enc(run.task_id);
}

// each env the run deployed: what it could reach outside and the state it kept its data in
function envLines(run) {
  return Object.entries((run.context || {}).envs || {}).map(([id, env]) => {
    const state = env && env.env_state ? ` · env state ${env.env_state.type}` +
      (env.env_state.instance_id ? ` (${env.env_state.instance_id})` : "") : "";
    return el("div", { class: "env-line",
      text: `env ${id}: network ${(env && env.network_policy) || "none"}${state}` });
  });
}

// which provider served each sandbox, and the ones of its fallback chain that could not
function sandboxLines(run) {
  return (run.sandboxes || []).map((box) => el("div", { class: "sandbox-line",
    text: `sandbox ${box.name}: ${box.provider}` +
      ((box.passed_over || []).length ? ` (passed over: ${box.passed_over.join("; ")})` : "") }));
}

async function runPage(main, id) {
  document.getElementById("where").textContent = "· run";
  const run = await api("/task-instances/" + enc(id));
  const head = el("div", { class: "card", id: "run-head" },
    el("h2", { text: run.instance_id }),
    el("div", {}, "task ", el("a", { href: "#/runs?task_id=" + enc(run.task_id), text: run.task_id }),
      ` v${run.task_version ?? "?"}`),
    el("div", { id: "run-outcome", class: "outcome-" + (run.outcome || "").replace(/ /g, "-"),
      text: `${run.status} · ${run.outcome || "no outcome yet"} · ${fmtSeconds(run.duration_seconds)}` }),
    el("div", { text: `scores: ${fmtScores(run.scores) || "none"}` }),
    el("div", { text: `started ${run.started_at_utc} · finished ${run.finished_at_utc || "—"}` }),
    ...envLines(run),
    ...sandboxLines(run),
    run.cancel_reason ? el("div", { class: "error", text: "cancelled: " + run.cancel_reason }) : null,
    el("button", { id: "run-again", text: "Run this task again", onclick: () => runAgain(run) }));
  // steps reported by run events while the run goes on (the record has them once it ends)
  const livesteps = {};
  const body = el("tbody", {}, ...stepRows(run, livesteps));
  const steps = el("table", { id: "steps" },
    el("thead", {}, el("tr", {}, ...["#", "step", "result", "took", "when", "checks"].map((h) => el("th", { text: h })))),
    body);
  const parts = [head, el("h3", { text: "Steps" }), steps];
  for (const [step, out] of trajectories(run)) {
    parts.push(el("h3", { text: `Transcript of step ${step}` + (out.agent_name ? ` (agent ${out.agent_name})` : "") }));
    parts.push(transcript(out.trajectory));
  }
  for (const [step, out] of Object.entries((run.context || {}).outputs || {})) {
    if (out && out.agent_trajectory_object_key) {
      const href = `${API}/objects/content?object_url=${enc(out.agent_trajectory_object_key)}`;
      // a stored transcript (prompt_agent keeps it as an object): read and shown in place
      const holder = el("div", { class: "stored-transcript" },
        el("h3", { text: `Transcript of step ${step}` + (out.agent_name ? ` (agent ${out.agent_name})` : "") }),
        el("div", { text: "loading…" }));
      parts.push(holder, el("div", {}, el("a", { href, text: `stored trajectory of ${step}` })));
      fetch(href, { credentials: "same-origin" })
        .then((response) => (response.ok ? response.json() : Promise.reject(new Error(response.statusText))))
        .then((events) => {
          if (!Array.isArray(events)) throw new Error("not a list of events");
          holder.lastChild.replaceWith(transcript(events));
        })
        .catch((error) => { holder.lastChild.textContent = `cannot show it: ${error.message}`; });
    }
  }
  parts.push(el("details", {}, el("summary", { text: "the whole record (JSON)" }),
    el("pre", { text: JSON.stringify(run, null, 2) })));
  main.replaceChildren(...parts);
  const here = location.hash;
  const again = soon(() => { if (location.hash === here) route(); });
  onRunEvent = (event) => {
    if (event.instance_id !== run.instance_id) return;
    if (event.kind === "run_finished") return again();  // the record now has everything
    if (event.kind === "step_started") {
      livesteps[event.step_id] = { started_at_utc: event.timestamp_utc, outcome: "running" };
    } else if (event.kind === "step_finished") {
      livesteps[event.step_id] = { ...(livesteps[event.step_id] || {}),
        outcome: event.outcome, duration_seconds: event.duration_seconds };
    }
    body.replaceChildren(...stepRows(run, livesteps));
  };
  if (run.status === "running") refreshTimer = setTimeout(route, 10000);  // the fallback
}

// -- two runs side by side -------------------------------------------------------------------

function eventKey(e) { return JSON.stringify([e.type, e.text, e.tool, e.arguments, e.result, e.tool_calls]); }

async function comparePage(main, a, b) {
  document.getElementById("where").textContent = "· compare";
  const [ra, rb] = await Promise.all([api("/task-instances/" + enc(a)), api("/task-instances/" + enc(b))]);
  const summary = (run) => el("div", { class: "card" },
    el("h3", {}, el("a", { href: "#/run/" + enc(run.instance_id), text: run.instance_id })),
    el("div", { text: `${run.task_id} v${run.task_version ?? "?"}` }),
    el("div", { class: "outcome-" + (run.outcome || "").replace(/ /g, "-"), text: `${run.status} · ${run.outcome || ""}` }),
    el("div", { text: `scores: ${fmtScores(run.scores) || "none"} · ${fmtSeconds(run.duration_seconds)}` }),
    el("div", { text: `steps: ${(run.completed_steps || []).join(" → ")}` }),
    el("div", { class: "error", text: (run.failures || []).map((f) => `${f.step_id}: ${failureText(f)}`).join("\n") }));
  const flat = (run) => trajectories(run).flatMap(([, out]) => out.trajectory);
  const ea = flat(ra), eb = flat(rb);
  let diverge = 0;
  while (diverge < ea.length && diverge < eb.length && eventKey(ea[diverge]) === eventKey(eb[diverge])) diverge++;
  const column = (events) => {
    const node = transcript(events);
    [...node.children].forEach((child, i) => { if (i >= diverge) child.classList.add("diverge"); });
    return node;
  };
  const note = ea.length || eb.length
    ? (diverge === ea.length && diverge === eb.length ? "The transcripts are the same."
      : `The transcripts diverge at event ${diverge + 1} (highlighted).`)
    : "Neither run has a transcript.";
  main.replaceChildren(
    el("div", { class: "cols" }, summary(ra), summary(rb)),
    el("p", { id: "divergence", text: note }),
    el("div", { class: "cols" }, column(ea), column(eb)));
}

// -- run groups: eval runs, task run --k, run-batch ------------------------------------------

async function groupsPage(main) {
  document.getElementById("where").textContent = "· run groups";
  const data = await api("/run-groups?limit=100");
  const selected = new Set();
  const compare = el("button", { id: "compare-groups", text: "Compare 2 selected", disabled: "" });
  compare.addEventListener("click", () => {
    const [a, b] = [...selected];
    location.hash = `#/groups/compare/${enc(a)}/${enc(b)}`;
  });
  const rows = data.items.map((g) => {
    const box = el("input", { type: "checkbox", "aria-label": "select " + g.run_group_id });
    box.addEventListener("change", () => {
      if (box.checked) selected.add(g.run_group_id); else selected.delete(g.run_group_id);
      compare.disabled = selected.size !== 2;
    });
    return el("tr", { "data-id": g.run_group_id },
      el("td", {}, box),
      el("td", {}, el("a", { href: "#/group/" + enc(g.run_group_id), text: g.run_group_id })),
      el("td", { text: g.kind }),
      el("td", {}, g.kind === "eval"
        ? el("a", { href: "#/leaderboard/" + enc(g.subject_id), text: g.subject_id }) : g.subject_id),
      el("td", { text: g.k }), el("td", { text: g.total }));
  });
  main.replaceChildren(
    el("div", { class: "pager" },
      el("span", { text: `${data.total} run groups` + (data.has_more ? " (newest 100 shown)" : "") }), compare),
    el("table", { id: "groups" },
      el("thead", {}, el("tr", {}, ...["", "group", "kind", "of (leaderboard)", "k", "runs"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows)));
}

function fmtRate(x) { return x === null || x === undefined ? "—" : x.toFixed(2); }

function matrix(group) {
  const width = Math.max(0, ...group.tasks.map((t) => t.samples.length));
  const head = ["task", ...Array.from({ length: width }, (_, i) => `#${i}`),
    "passed", "errors", "pass@1", `pass@${group.k}`];
  const rows = group.tasks.map((t) => el("tr", {},
    el("td", {}, el("a", { href: "#/runs?task_id=" + enc(t.task_id), text: `${t.task_id} v${t.task_version}` })),
    ...t.samples.map((s) => {
      const label = s.state === "done" ? (s.outcome || "?") : s.state;
      const cell = el("td", { class: "cell cell-" + label.replace(/ /g, "-"), title: label });
      cell.append(s.instance_id ? el("a", { href: "#/run/" + enc(s.instance_id), text: label }) : label);
      return cell;
    }),
    ...Array.from({ length: width - t.samples.length }, () => el("td", {})),
    el("td", { text: `${t.passed}/${t.completed}` }),
    el("td", { class: t.errors ? "error" : "", text: t.errors }),
    el("td", { text: fmtRate(t.pass_at_1) }), el("td", { text: fmtRate(t.pass_at_k) })));
  return el("table", { id: "matrix" },
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { text: h })))), el("tbody", {}, ...rows));
}

async function groupPage(main, id, params) {
  document.getElementById("where").textContent = "· run group";
  const offset = Number(params.get("tasks_offset") || 0);
  const pageLink = (to) => `#/group/${enc(id)}?tasks_offset=${to}`;
  const tasksPager = (group) => group.tasks_total > group.tasks.length
    ? el("div", { class: "pager", id: "tasks-pager" },
      offset > 0 ? el("a", { href: pageLink(Math.max(0, offset - 100)), text: "« earlier tasks" }) : null,
      el("span", { text: `tasks ${offset + 1}-${offset + group.tasks.length} of ${group.tasks_total}` }),
      offset + group.tasks.length < group.tasks_total ? el("a", { href: pageLink(offset + 100), text: "later tasks »" }) : null)
    : null;
  const draw = (group) => main.replaceChildren(
    el("div", { class: "card" }, el("h2", { text: group.run_group_id }),
      el("div", { text: `${group.kind} of ${group.subject_id}` + (group.subject_version ? ` v${group.subject_version}` : "") }),
      el("div", { id: "group-progress", text: `${group.done}/${group.total} runs done` + (group.complete ? " · complete" : " · running") }),
      el("a", { id: "group-runs", href: "#/runs?run_group=" + enc(group.run_group_id), text: "its runs" })),
    plots,
    tasksPager(group),
    matrix(group),
    el("p", { text: "Errors (infrastructure, cancelled) are counted apart, not as failures in pass@k." }),
    group.kind === "eval"
      ? el("p", {}, el("a", { id: "to-leaderboard", href: "#/leaderboard/" + enc(group.subject_id), text: "the eval's leaderboard" }))
      : null);
  const plots = el("div", { id: "plots" });
  // both asked at once: the matrix page and the plots come from different reads
  const [group, plotted] = await Promise.all([
    api(`/run-groups/${enc(id)}?tasks_offset=${offset}`),
    api(`/run-groups/${enc(id)}/plots?tasks_offset=${offset}`)]);
  drawPlots(plots, plotted);
  draw(group);
  if (!group.complete) {  // live: the server sends a snapshot every 2 s until the group is done
    stream = new EventSource(`${API}/run-groups/${enc(id)}/stream?tasks_offset=${offset}`);
    const update = (event) => {
      draw(JSON.parse(event.data));
      api(`/run-groups/${enc(id)}/plots?tasks_offset=${offset}`).then((data) => drawPlots(plots, data)).catch(() => {});
    };
    stream.addEventListener("snapshot", update);
    stream.addEventListener("complete", (event) => { update(event); stream.close(); });
  }
}

// -- plots: SVG drawn here, nothing fetched from elsewhere; each with its numbers a click away

const SVGNS = "http://www.w3.org/2000/svg";
const COLOURS = ["#3366cc", "#b3261e", "#137333", "#a36b00", "#7b3fb5", "#00838f"];

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = String(v); else node.setAttribute(k, v);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

// a figure: the plot, then its numbers as a table and a CSV file (made here, from the same rows)
function figure(id, title, plot, head, rows) {
  const csv = [head, ...rows].map((r) => r.map((c) => {
    const text = c === null || c === undefined ? "" : String(c);
    return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  }).join(",")).join("\n") + "\n";
  const table = el("table", { class: "numbers" },
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { text: h })))),
    el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((c) => el("td", { text: c ?? "" }))))));
  return el("figure", { id, class: "plot" }, el("figcaption", { text: title }), plot,
    el("details", {}, el("summary", { text: "numbers" }), table,
      el("a", { class: "csv", download: id + ".csv", href: "data:text/csv;charset=utf-8," + encodeURIComponent(csv), text: "CSV" })));
}

// x from 0..xmax and y from 0..ymax onto a 480 x 200 frame, with axes and a few ticks
function frame(xmax, ymax, xlabel, ylabel) {
  const W = 480, H = 200, L = 44, B = 28;
  const sx = (x) => L + (xmax ? (x / xmax) * (W - L - 10) : 0);
  const sy = (y) => H - B - (ymax ? (y / ymax) * (H - B - 10) : 0);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img" },
    svg("line", { x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#888" }),
    svg("line", { x1: L, y1: 10, x2: L, y2: H - B, stroke: "#888" }),
    svg("text", { x: W / 2, y: H - 4, "text-anchor": "middle", "font-size": 11, text: xlabel }),
    svg("text", { x: 10, y: 12, "font-size": 11, text: ylabel }));
  for (const t of [0, 0.5, 1]) {
    root.append(svg("text", { x: L - 6, y: sy(t * ymax) + 4, "text-anchor": "end", "font-size": 10, text: +(t * ymax).toFixed(2) }));
  }
  return { root, sx, sy };
}

function passAtKPlot(curves) {
  const kmax = Math.max(1, ...curves.flatMap((c) => c.points.map((p) => p.k)));
  const { root, sx, sy } = frame(kmax, 1, "k", "pass@k");
  curves.forEach((curve, i) => {
    const colour = COLOURS[i % COLOURS.length];
    root.append(svg("polyline", { fill: "none", stroke: colour, "stroke-width": 2,
      points: curve.points.map((p) => `${sx(p.k)},${sy(p.value)}`).join(" ") }));
    for (const p of curve.points) {
      root.append(svg("circle", { cx: sx(p.k), cy: sy(p.value), r: 3, fill: colour, class: "point",
        "data-series": curve.series, "data-k": p.k, "data-value": p.value },
      svg("title", { text: `${curve.series}: pass@${p.k} = ${p.value.toFixed(3)}` })));
    }
    root.append(svg("text", { x: 60, y: 24 + 13 * i, fill: colour, "font-size": 11, text: curve.series }));
  });
  return root;
}

// each task's runs by score (in tenths): a dot per score that occurred, its size the run count
function scoresPlot(tasks, labels) {
  const { root, sx, sy } = frame(Math.max(1, tasks.length), 1, "task", "score");
  const most = Math.max(1, ...tasks.flatMap((t) => t.counts));
  tasks.forEach((t, i) => {
    t.counts.forEach((n, bucket) => {
      if (!n) return;
      root.append(svg("circle", { cx: sx(i + 0.5), cy: sy(bucket / 10), r: 2 + 6 * Math.sqrt(n / most),
        fill: "#3366cc", "fill-opacity": 0.6, class: "point", "data-task": t.task_id,
        "data-score": labels[bucket], "data-value": n },
      svg("title", { text: `${t.task_id}: ${n} run(s) scored ${labels[bucket]}` })));
    });
  });
  return root;
}

// a distribution over buckets (time, tokens, cost of the runs)
function histogramPlot(hist, label) {
  const { root, sx, sy } = frame(hist.counts.length, Math.max(1, ...hist.counts), label, "runs");
  const width = Math.max(1, (sx(1) - sx(0)) * 0.8);
  hist.counts.forEach((n, i) => {
    if (!n) return;
    root.append(svg("rect", { x: sx(i) + 1, y: sy(n), width, height: sy(0) - sy(n), fill: "#3366cc",
      class: "bar", "data-bucket": hist.labels[i], "data-value": n },
    svg("title", { text: `${hist.labels[i]}: ${n} run(s)` })));
  });
  return root;
}

function drawPlots(node, data) {
  const figures = [
    figure("plot-passk", "pass@k against k, per agent · model", passAtKPlot(data.pass_at_k),
      ["series", "k", "pass@k", "tasks"],
      data.pass_at_k.flatMap((c) => c.points.map((p) => [c.series, p.k, p.value.toFixed(4), p.tasks]))),
    figure("plot-score-all", "all runs by score", histogramPlot(data.histograms.score, "score"),
      ["score", "runs"], data.histograms.score.labels.map((l, i) => [l, data.histograms.score.counts[i]])),
    figure("plot-scores", data.tasks_total > data.scores.length
      ? `each task's runs by score (tasks ${data.tasks_offset + 1}-${data.tasks_offset + data.scores.length} of ${data.tasks_total})`
      : "each task's runs by score", scoresPlot(data.scores, data.score_labels),
      ["task", "score", "runs"], data.scores.flatMap((t) => t.counts.map((n, b) => [t.task_id, data.score_labels[b], n]).filter((r) => r[2]))),
  ];
  for (const [key, label] of [["seconds", "seconds per run"], ["tokens", "tokens per run"], ["cost_usd", "cost per run (USD)"]]) {
    const hist = data.histograms[key];
    figures.push(hist.counts.some((n) => n)
      ? figure("plot-" + key, label, histogramPlot(hist, label), [label, "runs"], hist.labels.map((l, i) => [l, hist.counts[i]]))
      : el("p", { id: "plot-" + key, class: "note", text: `No run recorded its ${label.split(" ")[0]}.` }));
  }
  if (!data.runs) figures.splice(0, figures.length, el("p", { class: "note", text: "No finished run yet: nothing to plot." }));
  node.replaceChildren(...figures);
}

// -- two run groups compared, paired by task ------------------------------------------------

function intervalPlot(diff) {
  const W = 480, H = 60, mid = W / 2, scale = (W / 2 - 20);  // -1 .. +1 across the frame
  const x = (v) => mid + v * scale;
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, id: "interval", role: "img" },
    svg("line", { x1: 20, y1: 30, x2: W - 20, y2: 30, stroke: "#ccc" }),
    svg("line", { x1: mid, y1: 10, x2: mid, y2: 50, stroke: "#888", "stroke-dasharray": "3 3" }),
    svg("line", { x1: x(diff.ci_low), y1: 30, x2: x(diff.ci_high), y2: 30, stroke: "#3366cc", "stroke-width": 4, class: "ci" }),
    svg("circle", { cx: x(diff.difference), cy: 30, r: 5, fill: "#1d2330", class: "estimate" }),
    svg("text", { x: mid, y: 58, "text-anchor": "middle", "font-size": 10, text: "0" }),
    svg("text", { x: 20, y: 58, "font-size": 10, text: "-1 (B better)" }),
    svg("text", { x: W - 20, y: 58, "text-anchor": "end", "font-size": 10, text: "+1 (A better)" }));
}

async function groupComparePage(main, a, b) {
  document.getElementById("where").textContent = "· compare run groups";
  const c = await api(`/run-groups/${enc(a)}/compare/${enc(b)}`);
  const fmt = (v) => (v === null || v === undefined ? "—" : (v >= 0 ? "+" : "") + v.toFixed(4));
  const row = (name, d) => el("tr", {}, el("td", { text: name }), el("td", { class: "difference", text: d ? fmt(d.difference) : "—" }),
    el("td", { class: "ci-low", text: d ? fmt(d.ci_low) : "—" }), el("td", { class: "ci-high", text: d ? fmt(d.ci_high) : "—" }),
    el("td", { text: d ? d.tasks : 0 }));
  main.replaceChildren(
    el("div", { class: "card" }, el("h2", { text: "A: " + c.a + "  ·  B: " + c.b }),
      el("div", { text: `${c.common_tasks} tasks in common` + (c.only_in_a.length ? `; only in A: ${c.only_in_a.join(", ")}` : "") + (c.only_in_b.length ? `; only in B: ${c.only_in_b.join(", ")}` : "") }),
      el("div", { text: `pass@1: A ${fmtRate(c["pass@1_a"])} · B ${fmtRate(c["pass@1_b"])}` }),
      c.errors_a || c.errors_b ? el("div", { class: "note", text: `infrastructure errors left out: A ${c.errors_a}, B ${c.errors_b}` }) : null),
    el("p", { id: "statement", text: c.statement }),
    c["pass@1_difference"] ? intervalPlot(c["pass@1_difference"]) : null,
    el("table", { id: "comparison" },
      el("thead", {}, el("tr", {}, ...["measure", "A − B", "95% CI low", "95% CI high", "tasks"].map((h) => el("th", { text: h })))),
      el("tbody", {}, row("pass@1", c["pass@1_difference"]), row("mean score", c.mean_score_difference))),
    el("div", { class: "cols" },
      el("div", { class: "card", id: "better-in-a" }, el("h3", { text: "better in A" }), el("div", { text: c.better_in_a.join(", ") || "none" })),
      el("div", { class: "card", id: "better-in-b" }, el("h3", { text: "better in B" }), el("div", { text: c.better_in_b.join(", ") || "none" }))),
    el("p", { class: "note", text: `bootstrap: ${c.resamples} resamples of the shared tasks, seed ${c.seed} (agent-env eval report --compare ${c.a} ${c.b} prints the same)` }));
}

// -- an eval's leaderboard: sortable, filterable, exportable ---------------------------------

async function leaderboardPage(main, evalId, params) {
  document.getElementById("where").textContent = "· leaderboard";
  const data = await api(`/evals/${enc(evalId)}/leaderboard`);
  const columns = ["agent", "model", "runs", "errors", "tasks", "pass@1", `pass@${data.k}`, "mean_score", "seconds_per_run", "tokens_per_run", "cost_per_run"];
  if (data.k === 1) columns.splice(6, 1);
  let sortKey = params.get("sort") || "pass@1";
  let descending = params.get("order") !== "asc";
  const filter = el("input", { id: "board-filter", placeholder: "filter agent or model", value: params.get("q") || "" });
  const body = el("tbody", {});
  const cell = (v) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : (v ?? "—"));
  const heads = columns.map((name) => {
    const th = el("th", { class: "sortable", "data-key": name, text: name });
    th.addEventListener("click", () => {
      descending = sortKey === name ? !descending : true;
      sortKey = name;
      draw();
    });
    return th;
  });
  function draw() {
    const q = filter.value.toLowerCase();
    const rows = data.rows.filter((r) => !q || `${r.agent} ${r.model}`.toLowerCase().includes(q));
    rows.sort((x, y) => {
      const a = x[sortKey], b = y[sortKey];
      const order = a === b ? 0 : a === null || a === undefined ? 1 : b === null || b === undefined ? -1 : a < b ? -1 : 1;
      return descending ? -order : order;
    });
    for (const th of heads) th.setAttribute("aria-sort", th.dataset.key === sortKey ? (descending ? "descending" : "ascending") : "none");
    body.replaceChildren(...rows.map((r) => el("tr", { class: "board-row" }, ...columns.map((c) => el("td", { "data-key": c, text: cell(r[c]) })))));
  }
  filter.addEventListener("input", draw);
  draw();
  main.replaceChildren(
    el("div", { class: "card" }, el("h2", { text: `leaderboard: ${evalId}` }),
      el("div", { text: `${data.rows.length} agent · model rows over ${data.run_groups} run groups; pass@1 and pass@${data.k} are per-task estimates averaged over tasks; errors are left out` })),
    el("div", { class: "pager" }, filter,
      el("a", { id: "board-csv", href: `${API}/evals/${enc(evalId)}/leaderboard?format=csv`, text: "CSV" }),
      el("a", { href: `${API}/evals/${enc(evalId)}/leaderboard?format=md`, text: "Markdown" })),
    data.rows.length
      ? el("table", { id: "leaderboard" }, el("thead", {}, el("tr", {}, ...heads)), body)
      : el("p", { class: "note", text: "No finished run of this eval yet." }));
}

// -- the inbox: reviews to decide, asks to answer ---------------------------------------------

async function post(path, body) {
  const response = await fetch(API + path, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-AgentEnv-CSRF": csrfToken() },
    body: JSON.stringify(body) });
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

async function inboxPage(main) {
  const inbox = await api("/inbox");
  const said = el("p", { id: "inbox-said" });
  const decide = (review, approve, comment) => post("/reviews/decide", {
    instance_id: review.instance_id, step_id: review.step_id, approve, comment: comment.value || null,
  }).then((done) => { said.textContent = `Review ${done.step_id}: ${done.state}`; route(); },
          (err) => { said.textContent = "Error: " + err.message; });
  const reviewRows = inbox.reviews.map((r) => {
    const comment = el("input", { placeholder: "comment (optional)", class: "comment" });
    return el("tr", { class: "review" },
      el("td", {}, el("a", { href: "#/run/" + enc(r.instance_id), text: r.instance_id })),
      el("td", { text: r.step_id }), el("td", { text: r.label || "" }),
      el("td", {}, el("pre", { text: r.upstream || "" })),
      el("td", {}, comment,
        el("button", { class: "approve", onclick: () => decide(r, true, comment) }, "approve"),
        el("button", { class: "reject", onclick: () => decide(r, false, comment) }, "reject")));
  });
  const askRows = inbox.asks.map((a) => el("tr", { class: "ask" },
    el("td", {}, el("a", { href: "#/ask/" + enc(a.ask_id), text: a.ask_id })),
    el("td", { text: a.agent_name }), el("td", { text: a.prompt }), el("td", { text: a.created_at })));
  main.replaceChildren(
    el("h2", {}, "Inbox"), said,
    el("h3", {}, "Reviews awaiting a decision"),
    reviewRows.length ? el("table", { id: "reviews" },
      el("tr", {}, ...["run", "step", "asks", "the agent said", ""].map((h) => el("th", { text: h }))),
      ...reviewRows) : el("p", { text: "No review awaits a decision." }),
    el("h3", {}, "Prompts awaiting a person"),
    askRows.length ? el("table", { id: "asks" },
      el("tr", {}, ...["ask", "playing", "prompt", "since"].map((h) => el("th", { text: h }))),
      ...askRows) : el("p", { text: "No prompt awaits a person." }));
  // what waits changes as runs go on: look again every 2 s, redraw only when it changed
  const seen = inboxKey(inbox);
  const here = location.hash;
  const poll = async () => {
    if (location.hash !== here) return;
    const now = await api("/inbox").catch(() => null);
    if (now && inboxKey(now) !== seen) { route(); return; }
    refreshTimer = setTimeout(poll, 2000);
  };
  refreshTimer = setTimeout(poll, 2000);
}

function inboxKey(inbox) {
  return JSON.stringify([inbox.reviews.map((r) => [r.instance_id, r.step_id]),
                         inbox.asks.map((a) => a.ask_id)]);
}

async function askPage(main, id) {
  const ask = await api("/asks/" + enc(id));
  const calls = el("tbody", { id: "calls" });
  const said = el("p", { id: "ask-said" });
  const drawCalls = (list) => calls.replaceChildren(...list.map((c) => el("tr", { class: "call " + c.state },
    el("td", { text: c.name }), el("td", {}, el("pre", { text: JSON.stringify(c.arguments) })),
    el("td", {}, el("pre", { class: c.is_error ? "error" : "", text: c.state === "done" ? c.result : "(the run is calling it…)" })))));
  drawCalls(ask.calls);
  const here = location.hash;
  const poll = async () => {  // the calls' results arrive as the run makes them
    if (location.hash !== here) return;
    const now = await api("/asks/" + enc(id));
    drawCalls(now.calls);
    if (now.state !== ask.state) { route(); return; }
    if (now.state === "awaiting") refreshTimer = setTimeout(poll, 1000);
  };
  const tool = el("select", { id: "tool" }, ...ask.tools.map((t) => el("option", { value: t.name, text: t.name })));
  const args = el("textarea", { id: "tool-args", rows: 3, cols: 60 }, "{}");
  const help = el("p", { id: "tool-help", class: "muted" });
  const describe = () => {
    const t = ask.tools.find((x) => x.name === tool.value);
    help.textContent = t ? `${t.description || ""} ${JSON.stringify((t.input_schema || {}).properties || {})}` : "";
  };
  tool.addEventListener("change", describe);
  describe();
  const call = () => {
    let parsed;
    try { parsed = JSON.parse(args.value || "{}"); } catch (err) { said.textContent = "The arguments are not JSON: " + err.message; return; }
    post(`/asks/${enc(id)}/calls`, { name: tool.value, arguments: parsed })
      .then(() => { said.textContent = `Calling ${tool.value}…`; clearTimeout(refreshTimer); poll(); },
            (err) => { said.textContent = "Error: " + err.message; });
  };
  const answer = el("textarea", { id: "answer", rows: 5, cols: 80 });
  const send = () => post(`/asks/${enc(id)}/answer`, { text: answer.value })
    .then(() => { said.textContent = "Answered."; route(); }, (err) => { said.textContent = "Error: " + err.message; });
  const open = ask.state === "awaiting";
  main.replaceChildren(
    el("h2", {}, `${ask.agent_name}: asked in run `, el("a", { href: "#/run/" + enc(ask.instance_id), text: ask.instance_id })),
    el("p", { id: "ask-state", text: open ? "Waiting for your answer." : `This ask was ${ask.state}` + (ask.answered_by ? ` by ${ask.answered_by}` : "") + "." }),
    el("h3", {}, "The prompt"), el("pre", { id: "ask-prompt", text: ask.prompt }),
    ask.answer ? el("div", {}, el("h3", {}, "The answer"), el("pre", { id: "ask-answer", text: ask.answer })) : null,
    ask.tools.length ? el("div", { id: "tools" }, el("h3", {}, "The env's tools"),
      open ? el("div", {}, tool, " ", el("button", { id: "call", onclick: call }, "call"), help, args) : null,
      el("table", {}, el("thead", {}, el("tr", {}, ...["tool", "arguments", "result"].map((h) => el("th", { text: h })))), calls)) : null,
    said,
    open ? el("div", {}, el("h3", {}, "Your answer"), answer, el("br"), el("button", { id: "send-answer", onclick: send }, "send the answer")) : null);
  if (open) refreshTimer = setTimeout(poll, 1000);
}

window.addEventListener("hashchange", route);
route();

// A recorded step failure as the CLI shows it: AgentEnv's own errors ("plain") by their
// message alone, an unexpected exception with its kind.
function failureText(f) {
  return f.plain && f.error ? f.error : `${f.error_type}: ${f.error}`;
}
