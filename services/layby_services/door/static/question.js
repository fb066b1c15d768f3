// The open question: the whole question, its format, source, group, age and live countdown, its
// media and the control for its format; once resolved, what happened to it
// (docs/doors/inbox-page.md#answered-and-withdrawn).

import { buildControl } from "./controls.js";
import { $, duration, el } from "./helpers.js";
import { buildHistory } from "./history.js";
import { near, shortId, sourceOf } from "./list.js";
import { buildMedia } from "./media.js";
import { buildDelegate, routingLine } from "./routing.js";
import { FORMATS, openCard, state } from "./state.js";

const CONTROLS = ".controls input, .controls select, .controls textarea, .controls button";

export function renderDetail() {
  const pane = $("detail");
  const card = openCard();
  if (!card) {
    if (pane.firstChild) pane.replaceChildren();
    return;
  }
  if (!card.el) buildCard(card);
  if (pane.firstChild !== card.el) {
    pane.replaceChildren(card.el);
    // A question no longer open that was kept only to show its outcome can go now.
    for (const [id, other] of state.cards) if (id !== card.item.interaction_id && other.status !== "pending") state.cards.delete(id);
  }
  tickCard(card);
}

// Enter (or a double click on its row): to the open question's first control.
export function openControls() {
  const card = openCard();
  if (!card || !card.el) return;
  const first = card.el.querySelector(CONTROLS);
  if (first) first.focus();
}

function buildCard(card) {
  const item = card.item;
  const id = item.interaction_id;
  const node = el("article", { class: "card", "data-id": id, "aria-labelledby": `q-${id}` });
  node.append(el("p", { class: "question", id: `q-${id}`, text: item.question }));
  const meta = el("p", { class: "meta" });
  meta.append(el("span", { class: "chip", text: FORMATS[item.answer_format] || item.answer_format }));
  const source = sourceOf(item);
  if (source) meta.append(el("span", { text: source }));
  meta.append(el("span", { text: `group ${shortId(item.group_id)}` }));
  meta.append(el("span", { class: "age" }));
  meta.append(el("span", { class: "deadline" }));
  node.append(meta);
  const routing = routingLine(item);
  if (routing) node.append(routing);
  if (item.media && item.media.length) node.append(buildMedia(item.media));
  const body = el("div", { class: "controls" });
  body.append(buildControl(card));
  node.append(body);
  node.append(el("p", { class: "error card-error", role: "alert", hidden: true }));
  node.append(el("p", { class: "outcome", "aria-live": "polite" }));
  if (item.answer_format !== "external") node.append(buildDelegate(card));
  node.append(buildHistory(id));
  card.el = node;
  updateCard(card);
  tickCard(card);
  return node;
}

export function updateCard(card) {
  const node = card.el;
  node.classList.toggle("answered", card.status === "answered");
  node.classList.toggle("removed", card.status === "removed");
  const outcome = node.querySelector(".outcome");
  if (card.status === "pending") {
    if (card.voted || card.handedOn) return; // says what this person did; the question waits
    outcome.textContent = "";
    outcome.className = "outcome";
    return;
  }
  for (const c of node.querySelectorAll(CONTROLS)) c.disabled = true;
  const deadline = node.querySelector(".deadline");
  deadline.textContent = ""; // a resolved question has no countdown
  deadline.classList.remove("soon");
  const when = card.answeredAt ? card.answeredAt.toLocaleTimeString() : "";
  if (card.status === "answered") {
    outcome.className = "outcome done";
    outcome.textContent = card.by ? `Answered by ${card.by} at ${when}` : `Answered elsewhere at ${when}`;
  } else {
    outcome.className = "outcome gone";
    outcome.textContent = `No longer waiting (withdrawn at ${when})`;
  }
}

export function tickCard(card) {
  const node = card.el;
  if (!node || card.status !== "pending") return;
  const now = Date.now();
  node.querySelector(".age").textContent = `asked ${duration(now - Date.parse(card.item.created_at))} ago`;
  const deadline = node.querySelector(".deadline");
  const left = Date.parse(card.item.timeout_at) - now;
  deadline.textContent = left > 0 ? `${duration(left)} left` : "deadline passed";
  deadline.classList.toggle("soon", near(card.item, left));
}
