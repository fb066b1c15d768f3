// Answering from the page: POST {"answer": <value>} to the answer door, and what its reply means
// for the open question (docs/doors/inbox-page.md#answering-from-the-page).

import { plainDoorError } from "./control-form.js";
import { answeredHere, loadDoneSoon } from "./done.js";
import { schedule } from "./list.js";
import { resolve } from "./model.js";
import { showVoted } from "./routing.js";
import { updateCard } from "./question.js";
import { authHeaders } from "./session.js";
import { showSignIn } from "./signin.js";
import { state } from "./state.js";

export function clearErrors(card) {
  for (const e of card.el.querySelectorAll(".error")) {
    e.hidden = true;
    e.textContent = "";
  }
  for (const i of card.el.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
}

// A message at the form field it names (focused and marked invalid), else under the question.
export function showError(card, message, field) {
  clearErrors(card);
  const wrap = field ? card.el.querySelector(`.field[data-field="${CSS.escape(field)}"]`) : null;
  if (wrap) {
    const err = wrap.querySelector(".field-error");
    err.textContent = message;
    err.hidden = false;
    const input = wrap.querySelector("input, select, textarea");
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
    return;
  }
  const err = card.el.querySelector(".card-error");
  err.textContent = message;
  err.hidden = false;
}

// Send an answer, once at a time per question. `locate` maps a field the door names to the form
// field to show its error at (and goes to that field's step), or null.
export async function submit(card, answer, locate = () => null) {
  if (card.status !== "pending" || card.sending) return;
  card.sending = true;
  try {
    await send(card, answer, locate);
  } finally {
    card.sending = false;
  }
}

async function send(card, answer, locate) {
  clearErrors(card);
  const buttons = card.el.querySelectorAll(".controls button");
  buttons.forEach((b) => (b.disabled = true));
  let resp;
  try {
    resp = await fetch(`/api/interactions/${encodeURIComponent(card.item.interaction_id)}/answer`, {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json", "Layby-Client": "inbox" }),
      body: JSON.stringify({ answer }),
    });
  } catch {
    buttons.forEach((b) => (b.disabled = false));
    return showError(card, "The server cannot be reached; try again.", null);
  }
  if (resp.ok) {
    const reply = await resp.json().catch(() => ({}));
    if (reply.data && reply.data.status === "voted") return showVoted(card, reply.data);
    // 200 means this answer won, even if the stream's answered frame arrived first.
    card.status = "answered";
    card.by = "you";
    card.answeredAt = card.answeredAt || new Date();
    state.resolved.add(card.item.interaction_id);
    updateCard(card);
    answeredHere(card, answer);
    state.dirty = true;
    schedule();
    return;
  }
  let body = {};
  try {
    body = await resp.json();
  } catch {
    body = {};
  }
  if ((resp.status === 409 && !body.field) || resp.status === 404) {
    resolve(card.item.interaction_id, resp.status === 409 ? "answered" : "removed", null);
    loadDoneSoon(null);
    return;
  }
  if (resp.status === 401) return showSignIn("The token is no longer accepted.");
  buttons.forEach((b) => (b.disabled = false));
  const plain = plainDoorError(card, body.error || `The answer was refused (${resp.status}).`, body.field);
  const field = plain.field ? locate(plain.field) : null;
  showError(card, plain.message, field);
}
