// A routed question on its card (docs/routing.md): who decides it and the votes so far, the
// answer door's "voted" reply, and handing the question on to someone else.

import { el } from "./helpers.js";
import { authHeaders } from "./session.js";

// "2 of alice, bob, carol must agree · voted: alice": what the card says of its routing.
export function routingLine(item) {
  const routing = item.routing;
  if (!routing) return null;
  const who = routing.voters && routing.voters.length ? routing.voters.join(", ") : "the people it is for";
  const parts = [routing.required > 1 ? `${routing.required} of ${who} must agree` : `decided by ${who}`];
  if (item.votes && item.votes.length) parts.push(`voted: ${item.votes.map((v) => v.by).join(", ")}`);
  return el("p", { class: "routing", text: parts.join(" \u00b7 ") });
}

// The card after a vote that did not decide the question: pending, not answerable again by this
// person, saying how far the quorum is.
export function showVoted(card, data) {
  card.voted = true;
  for (const c of card.el.querySelectorAll(".controls button, .controls input, .controls textarea")) c.disabled = true;
  const outcome = card.el.querySelector(".outcome");
  outcome.className = "outcome voted";
  outcome.textContent = `Your vote is recorded (${data.votes} of ${data.required}); the question is decided when ${data.required} agree.`;
}

// "Hand on…": a field for who, an optional note, and a button that posts the delegation.
export function buildDelegate(card) {
  const id = card.item.interaction_id;
  const to = el("input", { type: "text", name: "to", placeholder: "identity", "aria-label": "Hand on to" });
  const note = el("input", { type: "text", name: "note", placeholder: "note (optional)", "aria-label": "Note" });
  const send = el("button", { type: "button", class: "delegate-send", text: "Hand on" });
  const error = el("p", { class: "error delegate-error", role: "alert", hidden: true });
  const details = el(
    "details",
    { class: "delegate" },
    el("summary", { text: "Hand on\u2026" }),
    el("div", { class: "delegate-fields" }, to, note, send),
    error,
  );
  send.addEventListener("click", async () => {
    error.hidden = true;
    send.disabled = true;
    try {
      const body = { to: to.value.trim() };
      if (note.value.trim()) body.note = note.value.trim();
      const r = await fetch(`/api/interactions/${encodeURIComponent(id)}/delegate`, {
        method: "POST",
        headers: authHeaders({ "Content-Type": "application/json" }),
        body: JSON.stringify(body),
      });
      const reply = await r.json().catch(() => ({}));
      if (!r.ok) throw new Error(reply.error || `refused (${r.status})`);
      card.handedOn = reply.data.to;
      for (const c of card.el.querySelectorAll(".controls button, .controls input, .controls textarea")) c.disabled = true;
      const outcome = card.el.querySelector(".outcome");
      outcome.className = "outcome handed-on";
      outcome.textContent = `Handed on to ${reply.data.to}.`;
      details.open = false;
    } catch (e) {
      error.textContent = e.message;
      error.hidden = false;
      send.disabled = false;
    }
  });
  return details;
}
