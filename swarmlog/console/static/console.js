// The console's page: follows /api/stream (server-sent events) and draws the page the address names.
// Everything from the log is untrusted: it reaches the page only as text (text nodes, textContent) and as attribute
// values, never as markup; the page's own script is the only one that runs (the server's Content-Security-Policy).
"use strict";

const SECTIONS = ["status", "swarm", "missions", "waits", "deadletters", "mission"];
const PAGES = ["swarm", "missions", "waits", "deadletters"];
const MAX_ROWS = 250; // rows drawn per table at most: a swarm of thousands is narrowed with the filters
const data = { status: null, swarm: null, missions: null, waits: null, deadletters: null, mission: null };
const ui = { page: "swarm", missionId: null, selected: null, source: null, retry: null };
// How long each section's last updates took to apply (parse, draw, and the layout that forces), in ms, by section:
// read by bench/console_bench.py, and by anyone in the browser's console.
const timings = {};
window.consoleTimings = timings;

// An element with attributes, event handlers and children; strings become text nodes.
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined) continue;
    if (key === "on") for (const [name, handler] of Object.entries(value)) node.addEventListener(name, handler);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function table(headings, rows, attrs) {
  return el("table", attrs, el("thead", null, el("tr", null, headings.map((h) => el("th", null, h)))),
    el("tbody", null, rows));
}

function time(ms) {
  return ms ? new Date(ms).toISOString().slice(11, 23) : "";
}

function counts(tally) {
  return Object.entries(tally || {}).map(([name, n]) => `${name} ${n}`).join(" · ");
}

function cut(text, length) {
  return text.length > length ? `${text.slice(0, length)}…` : text;
}

const ARTIFACT = /^artifact:sha256:[0-9a-f]{64}:[0-9]+$/;

function output(text, length) {
  // An artifact's reference links to its bytes; any other output is shown, cut to `length`.
  return ARTIFACT.test(text) ? el("a", { href: `/api/artifacts/${text}`, class: "artifact" }, text) : cut(text, length);
}

function place(topic, partition, offset) {
  return `${topic}[${partition}]@${offset}`;
}

// The address: #/swarm, #/missions, #/mission/<id>, #/waits, #/deadletters.
function route() {
  const [, page, ...rest] = (location.hash || "#/swarm").split("/");
  ui.page = [...PAGES, "mission", "replay"].includes(page) ? page : "swarm";
  const missionId = ui.page === "mission" ? decodeURIComponent(rest.join("/")) : null;
  for (const name of [...PAGES, "replay"]) {
    document.getElementById(`nav-${name}`).classList.toggle("current", ui.page === name);
  }
  if (missionId !== ui.missionId || !ui.source) {
    ui.missionId = missionId;
    ui.selected = null;
    data.mission = null;
    connect();
  }
  mount();
}

// Follow the stream; EventSource reconnects by itself after a dropped connection, and a refused one is tried again.
function connect() {
  if (ui.source) ui.source.close();
  clearTimeout(ui.retry);
  const query = ui.missionId ? `?mission=${encodeURIComponent(ui.missionId)}` : "";
  const source = new EventSource(`/api/stream${query}`);
  ui.source = source;
  link("connecting");
  source.onopen = () => link("live");
  source.onerror = () => {
    link(source.readyState === EventSource.CLOSED ? "closed" : "reconnecting");
    if (source.readyState === EventSource.CLOSED) ui.retry = setTimeout(connect, 2000);
  };
  for (const name of SECTIONS) {
    source.addEventListener(name, (message) => {
      const start = performance.now();
      data[name] = JSON.parse(message.data);
      update(name);
      void document.body.offsetHeight; // the layout the update needs, done now so that it is counted
      const kept = (timings[name] = timings[name] || []);
      kept.push(performance.now() - start);
      if (kept.length > 500) kept.shift();
    });
  }
}

function link(state) {
  const node = document.getElementById("link");
  node.textContent = state;
  node.className = `link ${state}`;
}

// The page's fixed parts (its filters keep their focus and text while the data below them changes).
function mount() {
  const main = document.getElementById("main");
  main.replaceChildren();
  if (ui.page === "swarm") {
    main.append(el("h2", null, "Regions"), el("div", { id: "regions" }), el("h2", null, "Agents"),
      el("div", { class: "toolbar" },
        el("label", null, "status ", el("select", { id: "status-filter", on: { change: () => update("swarm") } },
          el("option", { value: "" }, "all"))),
        el("input", { id: "agent-filter", type: "search", placeholder: "agent, capability, node, task",
          on: { input: () => update("swarm") } }),
        el("span", { id: "agent-counts" })),
      el("div", { id: "agents" }));
  } else if (ui.page === "missions") {
    main.append(el("h2", null, "Missions"),
      el("div", { class: "toolbar" },
        el("input", { id: "mission-filter", type: "search", placeholder: "id, title, phase, region",
          on: { input: () => update("missions") } }),
        el("label", null, el("input", { id: "running-only", type: "checkbox", on: { change: () => update("missions") } }),
          " running only")),
      el("div", { id: "missions" }));
  } else if (ui.page === "mission") {
    main.append(el("h2", null, "Mission ", el("span", { id: "mission-id" }, ui.missionId)),
      el("div", { id: "mission-summary" }), el("h2", null, "Tasks"), el("div", { id: "mission-tasks" }),
      el("h2", null, "Timeline"), el("div", { id: "timeline" }), el("div", { id: "event-details" }));
  } else if (ui.page === "waits") {
    main.append(el("h2", null, "Cycles"), el("div", { id: "cycles" }), el("h2", null, "Active waits"),
      el("div", { id: "waits" }), el("h2", null, "Deadlocks detected and broken"), el("div", { id: "deadlocks" }));
  } else if (ui.page === "replay") {
    const names = ["registry", "waitgraph", "budgets", "coordinator", "mission", "agent", "top"];
    main.append(el("h2", null, "Replay"),
      el("p", null, "A component's state folded from the log by the live processes' own folds, up to an offset or a " +
        "time (empty: now); registry, waitgraph and budgets are compared with the console's live state, the others " +
        "with the same fold to the log's end."),
      el("div", { class: "toolbar" },
        el("select", { id: "replay-component" }, names.map((n) => el("option", { value: n }, n))),
        el("input", { id: "replay-key", placeholder: "key: region, mission or agent id" }),
        el("input", { id: "replay-at", placeholder: "at: offset, epoch ms or ISO time" }),
        el("button", { id: "replay-run", type: "button", on: { click: replay } }, "Replay")),
      el("div", { id: "replay-result" }));
  } else {
    main.append(el("h2", null, "Dead letters"), el("div", { id: "deadletters" }));
  }
  for (const name of SECTIONS) update(name);
}

function update(name) {
  if (name === "status") return drawStatus();
  if (name !== ui.page || data[name] === null) {
    if (name === "mission" && ui.page === "mission" && data.mission === null) drawMissing();
    return;
  }
  ({ swarm: drawSwarm, missions: drawMissions, mission: drawMission, waits: drawWaits, deadletters: drawDeadLetters })[
    name]();
}

function drawStatus() {
  const status = data.status;
  if (!status) return;
  const problems = status.undecodable ? ` · ${status.undecodable} undecodable records passed over` : "";
  document.getElementById("feed").textContent =
    `${status.state} · ${status.events} events · ${status.bootstrap}${problems}`;
}

function drawSwarm() {
  const swarm = data.swarm;
  document.getElementById("regions").replaceChildren(table(
    ["region", "agents by status", "running missions", "queued tasks"],
    swarm.regions.map((r) => el("tr", { "data-region": r.region }, el("td", null, r.region),
      el("td", null, counts(r.agents)), el("td", null, r.running_missions), el("td", null, r.queued_tasks)))));
  const select = document.getElementById("status-filter");
  const statuses = [...new Set(swarm.agents.map((a) => a.status))].sort();
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, "all"), statuses.map((s) => el("option", { value: s }, s)));
  select.value = statuses.includes(chosen) ? chosen : "";
  const text = document.getElementById("agent-filter").value.toLowerCase();
  const shown = swarm.agents.filter((a) => (!select.value || a.status === select.value) &&
    (!text || [a.agent_id, a.node, a.task || "", ...a.capabilities].join(" ").toLowerCase().includes(text)));
  const tally = {};
  for (const agent of swarm.agents) tally[agent.status] = (tally[agent.status] || 0) + 1;
  const more = shown.length > MAX_ROWS ? ` · showing ${MAX_ROWS} of ${shown.length}: narrow with the filters` : "";
  document.getElementById("agent-counts").textContent = `${swarm.agents.length} agents: ${counts(tally)}${more}`;
  document.getElementById("agents").replaceChildren(table(
    ["agent", "region", "status", "capabilities", "model", "brain", "gpu", "node", "heartbeat age", "tokens (window)",
      "task"],
    shown.slice(0, MAX_ROWS).map((a) => el("tr", { "data-agent": a.agent_id },
      el("td", null, a.agent_id), el("td", null, a.region), el("td", { class: `status status-${a.status}` }, a.status),
      el("td", null, a.capabilities.join(", ")), el("td", null, a.model), el("td", null, a.brain),
      el("td", null, a.gpu === null ? "" : a.gpu), el("td", null, a.node), el("td", null, `${a.heartbeat_age_s} s`),
      el("td", { class: "tokens" }, a.budget === null ? a.tokens : `${a.tokens} / ${a.budget}`,
        a.throttled_until ? ` · throttled until ${time(a.throttled_until)}` : ""),
      el("td", null, a.task || "")))));
}

function drawMissions() {
  const text = document.getElementById("mission-filter").value.toLowerCase();
  const running = document.getElementById("running-only").checked;
  const shown = data.missions.filter((m) => (!running || !m.ended) &&
    (!text || [m.mission_id, m.title, m.phase, m.region || ""].join(" ").toLowerCase().includes(text)));
  const more = shown.length > MAX_ROWS ? el("p", null, `showing ${MAX_ROWS} of ${shown.length}: narrow with the filter`)
    : null;
  document.getElementById("missions").replaceChildren(shown.length ? table(
    ["mission", "title", "region", "phase", "tasks by state", "votes", "consensus", "tokens", "latency"],
    shown.slice(0, MAX_ROWS).map((m) => el("tr", { "data-mission": m.mission_id },
      el("td", null, el("a", { href: `#/mission/${encodeURIComponent(m.mission_id)}` }, m.mission_id)),
      el("td", null, m.title), el("td", null, m.region || ""),
      el("td", { class: `phase phase-${m.phase}` }, m.phase), el("td", { class: "tasks" }, counts(m.tasks)),
      el("td", null, m.votes), el("td", null, m.consensus || ""), el("td", null, m.tokens),
      el("td", null, m.latency_ms === null ? "" : `${m.latency_ms} ms`)))) : el("p", { class: "empty" }, "no missions"),
  more);
}

function drawMissing() {
  const summary = document.getElementById("mission-summary");
  if (summary) summary.replaceChildren(el("p", { class: "empty" }, "not in the log (yet)"));
}

function drawMission() {
  const mission = data.mission;
  const s = mission.summary;
  document.getElementById("mission-summary").replaceChildren(el("p", null,
    el("span", { id: "mission-phase", class: `phase phase-${s.phase}` }, s.phase), ` · ${s.title} · ${s.region || ""}`,
    ` · tasks: ${counts(s.tasks)} · votes ${s.votes}`, s.consensus ? ` · consensus ${s.consensus}` : "",
    ` · tokens ${s.tokens}`, s.latency_ms === null ? "" : ` · ${s.latency_ms} ms`),
  s.outputs.length ? el("p", null, "outputs: ", s.outputs.map((o) => el("code", { class: "output" }, output(o, Infinity), " "))) : null);
  document.getElementById("mission-tasks").replaceChildren(table(
    ["task", "replica", "state", "attempt", "agent", "output", "replicas"],
    mission.tasks.map((t) => el("tr", { "data-task": `${t.task_id}/${t.replica}` }, el("td", null, t.task_id),
      el("td", null, t.replica), el("td", { class: "state" }, t.state), el("td", null, t.attempt),
      el("td", null, t.agent || ""), el("td", { class: "output" }, output(t.output || "", 160)),
      el("td", { class: "agreement" }, mission.agreement[t.task_id] || "")))),
  mission.ballots.length ? table(["ballot", "votes by candidate", "chosen"], mission.ballots.map((b) =>
    el("tr", { "data-ballot": b.ballot_id }, el("td", null, b.ballot_id), el("td", null, counts(b.votes)),
      el("td", null, b.chosen || "")))) : null);
  const lanes = mission.lanes;
  const grid = el("div", { class: "timeline" }, el("div", { class: "lane-head" }, "time"),
    lanes.map((lane) => el("div", { class: "lane-head" }, lane)));
  grid.style.gridTemplateColumns = `8em repeat(${lanes.length}, minmax(10em, 1fr))`;
  mission.steps.forEach((step, row) => {
    const at = el("div", { class: "at" }, time(step.at_ms));
    at.style.gridRow = String(row + 2);
    at.style.gridColumn = "1";
    const button = el("button", {
      class: `step${step.mark ? ` mark-${step.mark}` : ""}${ui.selected === step.event_id ? " selected" : ""}`,
      "data-name": step.name, "data-event": step.event_id, title: place(step.topic, step.partition, step.offset),
      on: { click: () => { ui.selected = step.event_id; drawMission(); } },
    }, step.name, step.task_id ? ` ${step.task_id}` : "", step.attempt ? ` #${step.attempt}` : "");
    button.style.gridRow = String(row + 2);
    button.style.gridColumn = String(lanes.indexOf(step.lane) + 2);
    grid.append(at, button);
  });
  document.getElementById("timeline").replaceChildren(grid);
  const chosen = mission.steps.find((step) => step.event_id === ui.selected);
  document.getElementById("event-details").replaceChildren(chosen ? el("div", { class: "details" },
    el("h3", null, chosen.name),
    el("p", null, "at ", el("code", { id: "event-place" }, place(chosen.topic, chosen.partition, chosen.offset)),
      " · event ", el("code", null, chosen.event_id), chosen.causation_id ? " · caused by " : "",
      chosen.causation_id ? el("code", null, chosen.causation_id) : null),
    el("pre", { id: "event-payload" }, JSON.stringify(chosen.payload, null, 2))) : null);
}

function drawWaits() {
  const graph = data.waits;
  document.getElementById("cycles").replaceChildren(graph.cycles.length ? table(["agents (each waits for the next)",
    "waits"], graph.cycles.map((c) => el("tr", { class: "cycle" }, el("td", null, [...c.agents, c.agents[0]].join(" → ")),
    el("td", null, c.wait_ids.join(", "))))) : el("p", { class: "empty" }, "no cycle"));
  document.getElementById("waits").replaceChildren(graph.waits.length ? table(["waiter", "waits for", "since", "age",
    "wait"], graph.waits.map((w) => el("tr", { "data-wait": w.wait_id }, el("td", null, w.waiter),
    el("td", null, w.waits_for), el("td", null, time(w.started_ms)), el("td", null, `${w.age_s} s`),
    el("td", null, w.wait_id)))) : el("p", { class: "empty" }, "no agent waits"));
  document.getElementById("deadlocks").replaceChildren(graph.deadlocks.length ? table(["time", "event", "cycle",
    "aborted wait", "mission", "at"], graph.deadlocks.map((d) => el("tr", null, el("td", null, time(d.at_ms)),
    el("td", null, d.name), el("td", null, d.cycle.join(" → ")), el("td", null, d.aborted || ""),
    el("td", null, d.mission_id ? el("a", { href: `#/mission/${encodeURIComponent(d.mission_id)}` }, d.mission_id) : ""),
    el("td", null, place(d.topic, d.partition, d.offset))))) : el("p", { class: "empty" }, "none"));
}

async function replay() {
  const result = document.getElementById("replay-result");
  const query = new URLSearchParams({ component: document.getElementById("replay-component").value,
    key: document.getElementById("replay-key").value, at: document.getElementById("replay-at").value });
  result.replaceChildren(el("p", { class: "empty" }, "reading the log…"));
  const response = await fetch(`/api/replay?${query}`);
  const found = await response.json();
  if (!response.ok) {
    result.replaceChildren(el("p", { id: "replay-error", class: "status-DEAD" }, found.error));
    return;
  }
  const summary = `${found.events} events folded · ${found.entries} entries` +
    (found.compared ? ` · ${found.differing} differ from ${found.against}` : "");
  result.replaceChildren(el("p", { id: "replay-summary" }, summary),
    [...found.notes, ...found.problems].map((line) => el("p", { class: "empty" }, line)),
    table(found.compared ? ["entry", "replayed", found.against === "the log's end" ? "now" : "live", ""] :
      ["entry", "replayed"], found.rows.map((r) =>
      el("tr", { "data-entry": r.entry, class: r.differs ? "differs" : null }, el("td", null, r.entry),
        el("td", null, el("pre", null, JSON.stringify(r.replayed, null, 1))),
        found.compared ? el("td", null, el("pre", null, JSON.stringify(r.live, null, 1))) : null,
        found.compared ? el("td", null, r.differs ? "differs" : "") : null))));
}

function drawDeadLetters() {
  const letters = data.deadletters;
  document.getElementById("deadletters").replaceChildren(letters.length ? table(
    ["time", "reason", "error", "consumer", "origin", "bytes", "key (hex)", "payload (hex)", "payload (printable)"],
    letters.map((d) => el("tr", { "data-letter": place(d.topic, d.partition, d.offset) },
      el("td", null, time(d.at_ms)), el("td", { class: "reason" }, d.reason), el("td", null, d.error_type),
      el("td", null, d.consumer), el("td", null, place(d.origin.topic, d.origin.partition, d.origin.offset)),
      el("td", null, d.size), el("td", null, el("code", null, d.key_hex || "")),
      el("td", null, el("code", { class: "hex" }, d.payload_hex)),
      el("td", null, el("code", { class: "payload-text" }, d.payload_text))))) :
    el("p", { class: "empty" }, "no dead letters"));
}

window.addEventListener("hashchange", route);
route();
