// The Notifications section: the caller's notification feed, newest first, from the feed door
// (GET /api/notifications) — a user's own feed, an operator's the shared one
// (docs/doors/inbox-page.md#notifications-feed). Read on sign-in and every 30 seconds while
// signed in; every text is set as text, never parsed as HTML.

import { $, el } from "./helpers.js";
import { authHeaders, token } from "./session.js";

const REFRESH_MS = 30000;
const SHOWN = 50;
let timer = null;

export async function loadFeed() {
  if (!token()) return;
  let resp;
  try {
    resp = await fetch("/api/notifications", { headers: authHeaders(), cache: "no-store" });
  } catch {
    return;
  }
  if (!resp.ok) return;
  const body = await resp.json();
  renderFeed(body.data.notifications);
}

function renderFeed(notes) {
  const rows = notes.slice(0, SHOWN).map((n) =>
    el(
      "li",
      { class: "feed-row", "data-id": n.id },
      el("span", { class: "feed-message", text: n.message }),
      el(
        "p",
        { class: "meta" },
        el("time", { datetime: n.created_at, text: new Date(n.created_at).toLocaleString() }),
        n.recipient ? ` · to ${n.recipient}` : "",
        n.audience ? ` · for ${n.audience}` : "",
      ),
    ),
  );
  $("feed-list").replaceChildren(...rows);
  $("feed-empty").hidden = notes.length > 0;
  $("feed-count").textContent = notes.length ? String(notes.length) : "";
}

document.addEventListener("layby:signed-in", () => {
  loadFeed();
  clearInterval(timer);
  timer = setInterval(loadFeed, REFRESH_MS);
});
document.addEventListener("layby:signed-out", () => {
  clearInterval(timer);
  $("feed-list").replaceChildren();
  $("feed-empty").hidden = false;
  $("feed-count").textContent = "";
});
