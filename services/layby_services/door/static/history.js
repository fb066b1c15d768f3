// A question's history under its card: every recorded step (asked, answered, removed, webhook
// attempts), read from the history door each time it is opened (docs/doors/history.md).

import { el } from "./helpers.js";
import { authHeaders } from "./session.js";

// What each kind of step is called on the page (the runs dashboard's timeline says them too).
export const WORDS = {
  asked: "Asked",
  voted: "Voted",
  escalated: "Escalated",
  reminded: "Reminded",
  delegated: "Handed on",
  answered: "Answered",
  removed: "Removed",
  webhook_attempt: "Webhook attempt",
};

function line(entry) {
  const parts = [new Date(entry.at).toLocaleString(), WORDS[entry.kind] || entry.kind];
  if (entry.by) parts.push(`by ${entry.by}`);
  if (entry.to && entry.to.length) parts.push(`to ${entry.to.join(", ")}`);
  if (entry.via) parts.push(`via ${entry.via}`);
  else if (entry.channels && entry.channels.length) parts.push(`on ${entry.channels.join(", ")}`);
  if (entry.decision) parts.push(`\u2014 ${entry.decision}${entry.reason ? `: ${entry.reason}` : ""}`);
  else if (entry.reason) parts.push(`\u2014 ${entry.reason}`);
  if (entry.votes) parts.push(`(${entry.votes} votes)`);
  if (entry.kind === "delegated" && entry.detail) parts.push(`\u2014 ${entry.detail}`);
  if (entry.result) parts.push(`\u2014 ${entry.result}${entry.status ? ` (${entry.status})` : ""}`);
  return parts.join(" ");
}

export function buildHistory(interactionId) {
  const list = el("ol", { class: "history-entries" });
  const details = el("details", { class: "history" }, el("summary", { text: "History" }), list);
  details.addEventListener("toggle", async () => {
    if (!details.open) return;
    list.replaceChildren(el("li", { text: "Loading\u2026" }));
    try {
      const r = await fetch(`/api/interactions/${encodeURIComponent(interactionId)}/history`, { headers: authHeaders() });
      if (!r.ok) throw new Error(`error ${r.status}`);
      const body = await r.json();
      list.replaceChildren(...body.data.entries.map((e) => el("li", { text: line(e) })));
    } catch (e) {
      list.replaceChildren(el("li", { class: "error", text: `Could not load the history (${e.message}).` }));
    }
  });
  return details;
}
