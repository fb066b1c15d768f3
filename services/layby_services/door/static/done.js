// The Done tab: what stopped waiting, newest first, from the done door — the question, the answer
// (never a sensitive one), who answered, where and when (docs/doors/inbox-page.md#done).

import { $, cmp, el } from "./helpers.js";
import { schedule } from "./list.js";
import { authHeaders } from "./session.js";
import { state } from "./state.js";

const VIA = { inbox: "in the inbox", cli: "from the CLI", api: "through the API", callback: "by callback", expiry: "by expiry" };

export function showTab(tab) {
  state.tab = tab;
  $("tab-pending").setAttribute("aria-selected", tab === "pending" ? "true" : "false");
  $("tab-done").setAttribute("aria-selected", tab === "done" ? "true" : "false");
  $("pending-pane").hidden = tab !== "pending";
  $("done-pane").hidden = tab !== "done";
  if (tab === "done") loadDone();
  else schedule();
}

export async function loadDone(after = null, page = 1) {
  const seed = after ? `&after=${after}` : "";
  let resp;
  try {
    resp = await fetch(`/api/interactions/done?page=${page}&pageSize=50${seed}`, { headers: authHeaders(), cache: "no-store" });
  } catch {
    return;
  }
  if (!resp.ok) return;
  const body = await resp.json();
  const byId = new Map(state.done.map((d) => [d.interaction_id, d]));
  for (const item of body.data.items) byId.set(item.interaction_id, { ...byId.get(item.interaction_id), ...item });
  state.done = [...byId.values()].sort((a, b) => cmp(b.at || "", a.at || "")).slice(0, 500);
  state.doneTotal = body.data.total;
  state.doneNext = body.data.next_page;
  renderDone();
}

// After a frame resolved a question: read the done door as far as that frame, once things settle.
export function loadDoneSoon(after) {
  clearTimeout(state.doneTimer);
  state.doneTimer = setTimeout(() => loadDone(after), 300);
}

export function loadOlderDone() {
  loadDone(null, Math.floor(state.done.length / 50) + 1);
}

// An answer given on this page shows under Done at once.
export function answeredHere(card, answer) {
  const item = card.item;
  state.done = [
    { interaction_id: item.interaction_id, group_id: item.group_id, question: item.question, answer_format: item.answer_format,
      status: "answered", at: new Date().toISOString(), by: "you", via: "inbox", answer: item.sensitive ? undefined : answer,
      sensitive: item.sensitive || undefined },
    ...state.done.filter((d) => d.interaction_id !== item.interaction_id),
  ];
  renderDone();
}

function answerText(value) {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  if (value === true) return "Yes";
  if (value === false) return "No";
  return JSON.stringify(value);
}

function renderDone() {
  $("tab-done").textContent = `Done (${Math.max(state.doneTotal, state.done.length)})`;
  if (state.tab !== "done") return;
  const list = $("done-list");
  const nodes = state.done.slice(0, 200).map((d) => {
    const row = el("li", { class: `done-row ${d.status}`, "data-id": d.interaction_id });
    row.append(el("p", { class: "rq", text: d.question }));
    const what = el("p", { class: "meta" });
    if (d.status === "answered") {
      const answer = d.sensitive ? "(sensitive: not shown)" : answerText(d.answer);
      what.append(el("span", { class: "answer", text: answer }));
      what.append(el("span", { text: `by ${d.by === "you" ? "you" : d.by}` }));
      if (d.via) what.append(el("span", { class: "via", text: VIA[d.via] || d.via }));
    } else if (d.status === "expired") {
      what.append(el("span", { class: "answer", text: "Expired: no one answered in time" }));
    } else {
      what.append(el("span", { class: "answer", text: `Withdrawn (${d.reason || "removed"})` }));
    }
    if (d.at) what.append(el("time", { datetime: d.at, text: new Date(d.at).toLocaleString() }));
    row.append(what);
    return row;
  });
  list.replaceChildren(...nodes);
  $("done-empty").hidden = nodes.length > 0;
  $("done-more").hidden = !state.doneNext;
}
