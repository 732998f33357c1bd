// The explorer page: plain DOM, no build step, nothing loaded from elsewhere.
// Every stored value is put on the page with textContent (never innerHTML), so a prompt
// holding <script> shows as text. Routes are hash URLs, so links are stable and shareable:
//   #/runs?task_id=&eval=&run_group=&status=&outcome=&agent=&model=&since=&until=&offset=
//   #/run/<instance id>                                     one run, step by step
//   #/compare/<instance id>/<instance id>                   two runs side by side
//   #/groups, #/group/<run group id>                        run groups; one's pass@k matrix
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
  if (parts[0] === "groups") return show(groupsPage(main));
  if (parts[0] === "group" && parts[1]) return show(groupPage(main, decodeURIComponent(parts[1])));
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
  await draw();
  main.replaceChildren(form, results);
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
  const rows = data.items.map((g) => el("tr", {},
    el("td", {}, el("a", { href: "#/group/" + enc(g.run_group_id), text: g.run_group_id })),
    el("td", { text: g.kind }), el("td", { text: g.subject_id }),
    el("td", { text: g.k }), el("td", { text: g.total })));
  main.replaceChildren(
    el("p", { text: `${data.total} run groups` + (data.has_more ? " (newest 100 shown)" : "") }),
    el("table", { id: "groups" },
      el("thead", {}, el("tr", {}, ...["group", "kind", "of", "k", "runs"].map((h) => el("th", { text: h })))),
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

async function groupPage(main, id) {
  document.getElementById("where").textContent = "· run group";
  const draw = (group) => main.replaceChildren(
    el("div", { class: "card" }, el("h2", { text: group.run_group_id }),
      el("div", { text: `${group.kind} of ${group.subject_id}` + (group.subject_version ? ` v${group.subject_version}` : "") }),
      el("div", { id: "group-progress", text: `${group.done}/${group.total} runs done` + (group.complete ? " · complete" : " · running") }),
      el("a", { id: "group-runs", href: "#/runs?run_group=" + enc(group.run_group_id), text: "its runs" })),
    matrix(group),
    el("p", { text: "Errors (infrastructure, cancelled) are counted apart, not as failures in pass@k." }));
  const group = await api("/run-groups/" + enc(id));
  draw(group);
  if (!group.complete) {  // live: the server sends a snapshot every 2 s until the group is done
    stream = new EventSource(`${API}/run-groups/${enc(id)}/stream`);
    const update = (event) => draw(JSON.parse(event.data));
    stream.addEventListener("snapshot", update);
    stream.addEventListener("complete", (event) => { update(event); stream.close(); });
  }
}

window.addEventListener("hashchange", route);
route();

// A recorded step failure as the CLI shows it: AgentEnv's own errors ("plain") by their
// message alone, an unexpected exception with its kind.
function failureText(f) {
  return f.plain && f.error ? f.error : `${f.error_type}: ${f.error}`;
}
