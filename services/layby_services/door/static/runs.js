// The runs dashboard: a second view of the page (#runs). See docs/doors/inbox-page.md#the-runs-dashboard.
// It is driven by the inbox module's page events:
//   layby:signed-in  {token}              the person signed in (or the page reloaded signed in)
//   layby:signed-out                       the token was forgotten
//   layby:view       {view: "inbox"|"runs"} the view shown now
//   layby:frame      {event, id, data}     every frame of the interaction stream
// and asks the inbox module to return to the sign-in form with layby:unauthorized {message}.
// The token is the one session.js keeps for both views; one run's detail and its operations are
// in runs-run.js.
//
// What it reads: GET /api/runs/summary (the counts, the flows, the oldest open question),
// GET /api/runs (one page, narrowed by status and flow) and GET /api/runs/{id} for the selected
// run; it operates runs with POST /api/runs/{id}/cancel and /retry. It refreshes 300 ms after a
// stream frame and every 5 s while the view is shown. Every server value is set as text.

import { $, duration, el, emit } from "./helpers.js";
import { drawDetail, select } from "./runs-run.js";
import { authHeaders, token } from "./session.js";

const STATUSES = ["running", "parked", "resumed", "finished", "failed", "cancelled"];
const PAGE_SIZE = 50;
const PAGE_SIZE_MAX = 200; // the runs list door's maximum (docs/doors/list.md#paging)
const POLL_MS = 5000;
const FRAME_DEBOUNCE_MS = 300;

export const state = {
  signedIn: Boolean(token()), // the person is signed in (the inbox module says when that changes)
  view: location.hash === "#runs" ? "runs" : "inbox",
  status: null, // the status filter, null for every status
  flow: "", // the flow filter, "" for every flow
  size: PAGE_SIZE, // how many runs the list shows ("Show more runs" adds a page)
  selected: null, // the run id whose detail is shown
  shownStatus: null, // the status the detail's actions were drawn for
  shownDetail: "", // the detail last drawn, to leave the DOM alone when nothing changed
  poll: null,
  debounce: null,
  busy: null, // the refresh under way
  again: false, // a refresh was asked for while one was under way
  generation: 0, // bumped at sign-out: a late answer of an earlier session is dropped
};

export const shortId = (id) => String(id).slice(0, 8);

// -- time, in words -----------------------------------------------------------------------

// The dashboard redraws every 5 seconds: its times are said to the minute past the first one.
const inWords = (ms) => duration(ms, { seconds: false });

export function ago(iso) {
  if (!iso) return "";
  const ms = Date.now() - new Date(iso).getTime();
  return ms < 5000 ? "just now" : `${inWords(ms)} ago`;
}

export function until(iso) {
  const ms = new Date(iso).getTime() - Date.now();
  return ms >= 0 ? `in ${inWords(ms)}` : `passed ${inWords(ms)} ago`;
}

export function when(iso, words) {
  const at = new Date(iso);
  return el("time", { datetime: iso, title: at.toLocaleString(), text: words });
}

// -- the doors ----------------------------------------------------------------------------

class Refused extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function call(method, path) {
  const generation = state.generation;
  let resp;
  try {
    resp = await fetch(path, { method, headers: authHeaders({ Accept: "application/json" }) });
  } catch {
    throw new Refused(0, "the server cannot be reached");
  }
  if (generation !== state.generation) throw new Refused(0, "signed out");
  let body = null;
  try {
    body = await resp.json();
  } catch {
    body = null;
  }
  if (resp.status === 401) {
    signedOut();
    const message = (body && body.error) || "The token is no longer accepted.";
    emit("layby:unauthorized", { message });
    throw new Refused(401, message);
  }
  if (!resp.ok) throw new Refused(resp.status, (body && body.error) || `the server answered ${resp.status}`);
  return body ? body.data : null;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value) q.set(key, String(value));
  return q.toString();
}

// -- refreshing ---------------------------------------------------------------------------

function live() {
  return state.signedIn && state.view === "runs";
}

export function refresh() {
  if (!live()) return Promise.resolve();
  if (state.busy) {
    state.again = true;
    return state.busy;
  }
  state.busy = (async () => {
    try {
      do {
        state.again = false;
        await load();
      } while (state.again && live());
    } finally {
      state.busy = null;
    }
  })();
  return state.busy;
}

async function load() {
  const flow = state.flow || null;
  const selected = state.selected;
  try {
    const [summary, page, run] = await Promise.all([
      call("GET", `/api/runs/summary?${query({ flow })}`),
      call("GET", `/api/runs?${query({ status: state.status, flow, page: 1, pageSize: state.size })}`),
      selected ? loadRun(selected) : Promise.resolve(null),
    ]);
    if (!live()) return;
    drawSummary(summary);
    drawList(page);
    if (selected && selected === state.selected) drawDetail(run); // not another run's, picked meanwhile
    $("runs-updated").textContent = `Updated ${new Date().toLocaleTimeString()}; refreshed every 5 seconds and on every change of a question.`;
    if ($("runs-live").dataset.kind === "trouble") say("");
  } catch (err) {
    if (err.status === 401 || err.message === "signed out") return;
    say(`Could not load the runs: ${err.message}. Trying again in 5 seconds.`, "trouble");
  }
}

export async function loadRun(runId) {
  try {
    return await call("GET", `/api/runs/${encodeURIComponent(runId)}`);
  } catch (err) {
    if (err.status === 404) return { missing: runId };
    throw err;
  }
}

export function say(text, kind = "") {
  const node = $("runs-live");
  node.textContent = text;
  node.dataset.kind = kind;
}

function startPolling() {
  stopPolling();
  if (!live() || document.hidden) return;
  state.poll = setInterval(refresh, POLL_MS);
  refresh();
}

function stopPolling() {
  clearInterval(state.poll);
  clearTimeout(state.debounce);
  state.poll = null;
  state.debounce = null;
}

function signedOut() {
  state.signedIn = false;
  state.generation += 1;
  state.selected = null;
  stopPolling();
  $("runs-rows").replaceChildren();
  $("run-detail").hidden = true;
  state.shownDetail = "";
  state.shownStatus = null;
}

document.addEventListener("layby:signed-in", () => {
  state.signedIn = true;
  startPolling();
});
document.addEventListener("layby:signed-out", signedOut);
document.addEventListener("layby:view", (e) => {
  state.view = (e.detail && e.detail.view) || "inbox";
  if (state.view === "runs") startPolling();
  else stopPolling();
});
document.addEventListener("layby:frame", () => {
  if (!live()) return;
  clearTimeout(state.debounce);
  state.debounce = setTimeout(refresh, FRAME_DEBOUNCE_MS);
});
document.addEventListener("visibilitychange", () => (document.hidden ? stopPolling() : startPolling()));

// -- the summary: counts per status, the flow filter, the oldest open question -------------

const statusButtons = new Map(); // status (or "all") -> {button, count}

function buildFilters() {
  const group = $("runs-statuses");
  for (const status of ["all", ...STATUSES]) {
    const count = el("span", { class: "runs-count", text: "–" });
    const button = el(
      "button",
      { type: "button", class: `runs-filter status-${status}`, "aria-pressed": status === "all" ? "true" : "false", "data-status": status },
      el("span", { class: "runs-filter-name", text: status === "all" ? "all" : status }),
      " ",
      count,
    );
    button.addEventListener("click", () => {
      state.status = status === "all" ? null : status;
      state.size = PAGE_SIZE;
      for (const [name, b] of statusButtons) b.button.setAttribute("aria-pressed", String(name === status));
      refresh();
    });
    statusButtons.set(status, { button, count });
    group.append(button);
  }
  $("runs-flow").addEventListener("change", (e) => {
    state.flow = e.target.value;
    state.size = PAGE_SIZE;
    refresh();
  });
  $("runs-more").addEventListener("click", () => {
    state.size = Math.min(state.size + PAGE_SIZE, PAGE_SIZE_MAX);
    refresh();
  });
}

function drawSummary(summary) {
  $("runs-total").textContent = `(${summary.total})`;
  statusButtons.get("all").count.textContent = String(summary.total);
  for (const status of STATUSES) statusButtons.get(status).count.textContent = String(summary.counts[status]);
  const select = $("runs-flow");
  const flows = summary.flows.includes(state.flow) || !state.flow ? summary.flows : [...summary.flows, state.flow];
  const have = [...select.options].slice(1).map((o) => o.value);
  if (have.join("\n") !== flows.join("\n")) {
    select.replaceChildren(el("option", { value: "", text: "All flows" }), ...flows.map((f) => el("option", { value: f, text: f })));
    select.value = state.flow;
  }
  const box = $("runs-oldest");
  const oldest = summary.oldest_open;
  if (!oldest) {
    box.replaceChildren(el("p", { class: "runs-oldest-none", text: "No run is waiting for an answer." }));
    return;
  }
  box.replaceChildren(
    el("p", { class: "runs-oldest-head" }, "Oldest waiting question, asked ", when(oldest.created_at, ago(oldest.created_at)), ":"),
    el("p", { class: "runs-oldest-question", text: oldest.question }),
    el(
      "p",
      { class: "meta" },
      el("span", {}, "Run ", runButton(oldest.run_id, `Show run ${shortId(oldest.run_id)}`)),
      el("span", { text: `Flow ${oldest.flow}` }),
      oldest.audience ? el("span", { text: `For ${oldest.audience}` }) : null,
      el("span", {}, "Deadline ", when(oldest.expiry_at, until(oldest.expiry_at))),
    ),
  );
}

// -- the list -----------------------------------------------------------------------------

function runButton(runId, label) {
  return el("button", {
    type: "button",
    class: "run-link",
    "data-run-id": runId,
    "aria-label": label,
    title: runId,
    text: shortId(runId),
    onclick: () => select(runId),
  });
}

function drawList(page) {
  const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest("#runs-rows [data-run-id]");
  const keep = focused ? focused.dataset.runId : null;
  const rows = page.items.map((run) => {
    const row = el(
      "tr",
      { "data-run-id": run.run_id, class: run.run_id === state.selected ? "selected" : "" },
      el("td", { "data-label": "Run" }, runButton(run.run_id, `Show run ${shortId(run.run_id)} (${run.flow}, ${run.status})`)),
      el("td", { "data-label": "Flow", text: run.flow }),
      el("td", { "data-label": "Status" }, badge(run.status)),
      el("td", { "data-label": "Identity", text: run.identity }),
      el("td", { "data-label": "Started" }, when(run.created_at, ago(run.created_at))),
      el("td", { "data-label": "Last activity" }, when(run.updated_at, ago(run.updated_at))),
      el("td", { "data-label": "Steps", class: "num", text: String(run.steps) }),
    );
    if (run.run_id === state.selected) row.querySelector(".run-link").setAttribute("aria-current", "true");
    return row;
  });
  $("runs-rows").replaceChildren(...rows);
  if (keep) {
    const again = $("runs-rows").querySelector(`button[data-run-id="${CSS.escape(keep)}"]`);
    if (again) again.focus();
  }
  const filter = [state.status, state.flow && `flow ${state.flow}`].filter(Boolean).join(", ");
  $("runs-caption").textContent = `Runs${filter ? ` (${filter})` : ""}, most recently active first: ${page.items.length} of ${page.total}`;
  $("runs-empty").hidden = page.items.length > 0;
  $("runs-empty").textContent = filter ? `No ${filter} runs.` : "No runs to show.";
  $("runs-more").hidden = !page.next_page || state.size >= PAGE_SIZE_MAX;
}

export function badge(status) {
  return el("span", { class: `badge status-${status}`, text: status });
}

// -- start ----------------------------------------------------------------------------------

buildFilters();
// Loaded after the sign-in already happened (a reload): the token and the view are known now.
if (live()) startPolling();
