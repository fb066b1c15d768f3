// One run of the runs dashboard: its facts, what its status calls for (a parked run's questions,
// a failed run's error, a finished run's result), and cancel and retry, each with a confirm step
// (docs/doors/inbox-page.md#the-runs-dashboard).

import { $, duration, el } from "./helpers.js";
import { WORDS as QUESTION_WORDS } from "./history.js";
import { ago, badge, call, loadRun, refresh, say, shortId, state, until, when } from "./runs.js";

export async function select(runId) {
  state.selected = runId;
  state.shownDetail = "";
  state.shownStatus = null;
  for (const link of $("runs-rows").querySelectorAll("button.run-link")) {
    const on = link.dataset.runId === runId;
    link.closest("tr").classList.toggle("selected", on);
    if (on) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  }
  hideActionError();
  $("run-timeline").open = false;
  $("run-timeline-entries").replaceChildren();
  $("run-detail").hidden = false;
  $("run-detail-title").textContent = `Run ${shortId(runId)}`;
  $("run-detail-body").replaceChildren(el("p", { class: "hint", text: "Loading…" }));
  $("run-actions").replaceChildren();
  $("run-detail").focus();
  try {
    const run = await loadRun(runId);
    if (state.selected === runId) drawDetail(run);
  } catch (err) {
    if (err.status !== 401) showActionError(`Could not load the run: ${err.message}.`);
  }
}

export function drawDetail(run) {
  if (!run) return;
  if (run.missing) {
    $("run-detail-body").replaceChildren(el("p", { class: "gone", text: "This run is not found (or not yours to see)." }));
    $("run-actions").replaceChildren();
    state.shownStatus = null;
    return;
  }
  const fingerprint = JSON.stringify(run) + ago(run.updated_at);
  if (fingerprint !== state.shownDetail) {
    state.shownDetail = fingerprint;
    $("run-detail-title").textContent = `Run ${shortId(run.run_id)}`;
    $("run-detail-body").replaceChildren(...detailBody(run));
  }
  if (run.status !== state.shownStatus) {
    state.shownStatus = run.status;
    drawActions(run);
  }
}

function detailBody(run) {
  const facts = el("dl", { class: "run-facts" });
  const fact = (name, ...value) => facts.append(el("dt", { text: name }), el("dd", {}, ...value));
  fact("Run id", el("code", { text: run.run_id }));
  fact("Flow", run.flow);
  fact("Status", badge(run.status));
  fact("Identity", run.identity);
  fact("Started", when(run.created_at, ago(run.created_at)));
  fact("Last activity", when(run.updated_at, ago(run.updated_at)));
  fact("Steps", String(run.steps));
  if (run.version && run.version !== 1) fact("Version", String(run.version)); // docs/versions.md
  if (run.generation) fact("Generation", String(run.generation)); // parks and retries so far
  if (run.cancelled_by) fact("Cancelled by", run.cancelled_by);
  if (run.retried_by) fact("Last retried by", run.retried_by);
  const out = [];
  if (run.warning) out.push(el("p", { class: "run-warning", role: "note", text: run.warning }));
  out.push(facts);
  if (run.status === "failed" && run.error !== undefined) {
    out.push(el("h4", { text: "Error" }), el("pre", { class: "run-error", text: run.error }));
  }
  if (run.status === "finished" && run.result !== undefined) {
    out.push(el("h4", { text: "Result" }), el("pre", { class: "run-result", text: JSON.stringify(run.result, null, 2) }));
  }
  if (run.asks && run.asks.length) {
    const open = new Set(run.open || []);
    out.push(el("h4", { text: open.size ? `Open questions (${open.size} of ${run.asks.length})` : "Questions" }));
    out.push(el("ol", { class: "run-asks" }, ...run.asks.map((ask) => askItem(ask, open.has(ask.interaction_id)))));
  }
  return out;
}

function askItem(ask, open) {
  const meta = el("p", { class: "meta" });
  meta.append(el("span", { class: "ask-status", text: open ? "waiting" : ask.status }));
  meta.append(el("span", { class: "ask-to", text: `For ${ask.audience || "anyone who may answer"}` }));
  if (ask.channel) meta.append(el("span", { class: "ask-channel", text: `Channel ${ask.channel}` }));
  if (ask.recipient) meta.append(el("span", { class: "ask-recipient", text: `Recipient ${ask.recipient}` }));
  if (open) meta.append(el("span", { class: "ask-deadline" }, "Deadline ", when(ask.expiry_at, until(ask.expiry_at))));
  if (ask.answered_by) meta.append(el("span", { text: `Answered by ${ask.answered_by}` }));
  return el(
    "li",
    { class: `run-ask${open ? " open" : ""}`, "data-id": ask.interaction_id },
    el("p", { class: "question", text: ask.question }),
    meta,
  );
}

// -- cancel and retry, each with a confirm step --------------------------------------------

const OPERATIONS = {
  cancel: {
    allowed: ["running", "parked", "resumed"],
    label: "Cancel run…",
    ask: "Cancel this run? It stops for good and its open questions leave the inbox.",
    yes: "Yes, cancel the run",
    no: "Keep it",
    done: (run) => `Run ${shortId(run)} cancelled.`,
  },
  retry: {
    allowed: ["failed"],
    label: "Retry run…",
    ask: "Retry this run? It executes again from its last recorded step.",
    yes: "Yes, retry the run",
    no: "Not now",
    done: (run) => `Run ${shortId(run)} retried; it executes again.`,
  },
};

function drawActions(run) {
  const box = $("run-actions");
  box.replaceChildren();
  for (const [action, op] of Object.entries(OPERATIONS)) {
    if (!op.allowed.includes(run.status)) continue;
    const start = el("button", { type: "button", class: action === "cancel" ? "secondary danger" : "", text: op.label });
    start.addEventListener("click", () => confirmStep(run.run_id, action, start));
    box.append(start);
  }
}

function confirmStep(runId, action, start) {
  const op = OPERATIONS[action];
  hideActionError();
  const yes = el("button", { type: "button", class: action === "cancel" ? "danger" : "", text: op.yes });
  const no = el("button", { type: "button", class: "secondary", text: op.no });
  const box = el("div", { class: "run-confirm", role: "group", "aria-label": op.ask }, el("p", { text: op.ask }), el("div", { class: "actions" }, yes, no));
  start.hidden = true;
  start.after(box);
  no.addEventListener("click", () => {
    box.remove();
    start.hidden = false;
    start.focus();
  });
  yes.addEventListener("click", async () => {
    yes.disabled = no.disabled = true;
    try {
      await call("POST", `/api/runs/${encodeURIComponent(runId)}/${action}`);
      say(op.done(runId));
    } catch (err) {
      if (err.status === 401) return;
      showActionError(refusal(action, err));
    }
    box.remove();
    start.hidden = false;
    state.shownStatus = null; // draw the actions the new status allows
    await refresh();
    const next = $("run-actions").querySelector("button");
    (next || $("run-detail")).focus();
  });
  yes.focus();
}

function refusal(action, err) {
  const verb = action === "cancel" ? "cancel" : "retry";
  if (err.status === 409) return `Could not ${verb} the run: ${err.message}.`;
  if (err.status === 404) return `Could not ${verb} the run: it is not found (or not yours to operate).`;
  return `Could not ${verb} the run: ${err.message}.`;
}

// -- the timeline: the run's story from the log, read each time it is opened -----------------

const WORDS = {
  ...QUESTION_WORDS,
  started: "Started",
  step: "Step",
  parked: "Parked",
  resumed: "Resumed",
  retried: "Retried",
  moved: "Moved",
  finished: "Finished",
  failed: "Failed",
  cancelled: "Cancelled",
};

function waitText(ms) {
  if (ms < 1000) return `+${ms} ms`;
  return `+${duration(ms)}`;
}

function timelineItem(entry) {
  const head = [new Date(entry.at).toLocaleString(), waitText(entry.after_ms), WORDS[entry.kind] || entry.kind];
  if (entry.name) head.push(entry.name);
  if (entry.by) head.push(`by ${entry.by}`);
  if (entry.via) head.push(`via ${entry.via}`);
  else if (entry.channels && entry.channels.length) head.push(`on ${entry.channels.join(", ")}`);
  const item = el("li", { class: `tl tl-${entry.kind}` }, el("span", { class: "tl-head", text: head.join(" \u00b7 ") }));
  const said = [entry.question, entry.detail, entry.error].filter(Boolean);
  if (entry.answer !== undefined) said.push(`answer ${JSON.stringify(entry.answer)}`);
  if (said.length) item.append(el("span", { class: "tl-said", text: ` \u2014 ${said.join(" \u2014 ")}` }));
  return item;
}

$("run-timeline").addEventListener("toggle", async () => {
  const box = $("run-timeline");
  const list = $("run-timeline-entries");
  const runId = state.selected;
  if (!box.open || !runId) return;
  list.replaceChildren(el("li", { text: "Loading\u2026" }));
  try {
    const data = await call("GET", `/api/runs/${encodeURIComponent(runId)}/timeline?pageSize=200`);
    if (state.selected !== runId) return;
    const entries = data.entries.map(timelineItem);
    if (data.next_page) entries.push(el("li", { class: "hint", text: `${data.total - 200} more: layby runs timeline ${runId} --page 2` }));
    list.replaceChildren(...entries);
  } catch (err) {
    if (err.status !== 401) list.replaceChildren(el("li", { class: "error", text: `Could not load the timeline (${err.message}).` }));
  }
});

export function showActionError(text) {
  const node = $("run-action-error");
  node.textContent = text;
  node.hidden = false;
}

function hideActionError() {
  const node = $("run-action-error");
  node.textContent = "";
  node.hidden = true;
}
