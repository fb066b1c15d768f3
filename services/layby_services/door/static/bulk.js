// Deciding several questions at once (docs/doors/inbox-page.md#bulk-decisions): tick rows, then
// approve, reject or answer them all. Each answer is its own POST to the answer door, so each is
// decided by its own compare-and-set; the page then lists what became of every one — answered,
// answered by someone else first, a vote that waits for more, skipped or refused.

import { $, el } from "./helpers.js";
import { schedule } from "./list.js";
import { resolve } from "./model.js";
import { updateCard } from "./question.js";
import { authHeaders } from "./session.js";
import { state } from "./state.js";

// What one bulk action answers a question of a given item with (null: it does not fit).
const ACTIONS = {
  approve: (item) => {
    if (item.answer_format === "confirm") return true;
    if (item.answer_format === "review" && item.format_payload && item.format_payload.arguments_sha256) {
      return { decision: "accept", arguments_sha256: item.format_payload.arguments_sha256 };
    }
    return null;
  },
  reject: (item) => {
    if (item.answer_format === "confirm") return false;
    if (item.answer_format === "review") return { decision: "reject" };
    return null;
  },
  text: (item, text) => (item.answer_format === "text" || item.answer_format === "select" ? text : null),
};
const SKIPPED = {
  approve: "skipped: not a yes/no or review question",
  reject: "skipped: not a yes/no or review question",
  text: "skipped: not a text or choice question",
};

export function renderBulk() {
  const n = state.picked.size;
  $("bulk").hidden = n === 0 && !$("bulk-results").childElementCount;
  $("bulk-count").textContent = n ? `${n} selected` : "";
  for (const b of $("bulk").querySelectorAll(".bulk-act")) b.disabled = n === 0;
}

function pick(id, on) {
  const card = state.cards.get(id);
  if (on && card) state.picked.set(id, card.item.question);
  else state.picked.delete(id);
  renderBulk();
}

const ENDED = { answered: "already answered by someone else", removed: "no longer open" };

async function answerOne(card, answer) {
  const id = card.item.interaction_id;
  let resp;
  try {
    resp = await fetch(`/api/interactions/${encodeURIComponent(id)}/answer`, {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json", "Layby-Client": "inbox" }),
      body: JSON.stringify({ answer }),
    });
  } catch {
    return "not sent: the server cannot be reached";
  }
  const body = await resp.json().catch(() => ({}));
  if (resp.ok && body.data && body.data.status === "voted") {
    return `your vote is recorded (${body.data.votes} of ${body.data.required})`;
  }
  if (resp.ok) {
    if (card.status === "pending") {
      card.status = "answered";
      card.by = "you";
      card.answeredAt = new Date();
      state.resolved.add(id);
      if (card.el) updateCard(card);
      if (state.selected !== id) state.cards.delete(id);
    }
    return "answered";
  }
  if (resp.status === 409 && !body.field) {
    resolve(id, "answered", null);
    return "already answered by someone else";
  }
  if (resp.status === 404) {
    resolve(id, "removed", null);
    return "no longer open";
  }
  return `refused: ${body.error || resp.status}`;
}

async function run(kind) {
  const text = $("bulk-text").value;
  if (kind === "text" && !text.trim()) {
    $("bulk-text").focus();
    return;
  }
  for (const b of $("bulk").querySelectorAll("button")) b.disabled = true;
  const results = await Promise.all(
    [...state.picked].map(async ([id, question]) => {
      const card = state.cards.get(id);
      if (!card || card.status !== "pending") {
        // Resolved elsewhere while it was ticked: the stream said so before this press.
        return { question, outcome: ENDED[state.pickedEnded.get(id)] || ENDED.answered };
      }
      const answer = ACTIONS[kind](card.item, text);
      const outcome = answer === null ? SKIPPED[kind] : await answerOne(card, answer);
      return { question, outcome };
    }),
  );
  state.picked.clear();
  state.pickedEnded.clear();
  $("bulk-results").replaceChildren(
    ...results.map((r) => el("li", {}, el("span", { class: "bulk-q", text: r.question }), el("span", { class: "bulk-o", text: ` \u2014 ${r.outcome}` }))),
  );
  for (const b of $("bulk").querySelectorAll("button")) b.disabled = false;
  state.dirty = true;
  schedule();
  renderBulk();
}

$("rows-inner").addEventListener("change", (e) => {
  const box = e.target;
  if (!box.classList || !box.classList.contains("pick")) return;
  const row = box.closest(".row");
  if (row) pick(row.dataset.id, box.checked);
});
// A tick selects the row for a bulk decision; it does not open the question.
$("rows-inner").addEventListener("click", (e) => {
  if (e.target.classList && e.target.classList.contains("pick")) e.stopPropagation();
});
$("bulk-approve").addEventListener("click", () => run("approve"));
$("bulk-reject").addEventListener("click", () => run("reject"));
$("bulk-answer").addEventListener("click", () => run("text"));
$("bulk-clear").addEventListener("click", () => {
  state.picked.clear();
  state.pickedEnded.clear();
  $("bulk-results").replaceChildren();
  schedule();
  renderBulk();
});
