// The Layby inbox, the page's entry module: every pending question, live, as dense rows with one
// open question beside them, and the runs dashboard as a second view (docs/doors/inbox-page.md).
//
// The modules, by role: session.js (the token), signin.js (signing in and out, the views),
// stream.js (the SSE client), model.js (loading every pending question, frames, the open count),
// list.js and filters.js (the virtual list, search, filters and order), question.js (the open
// question), answer.js (sending an answer), controls.js and control-<format>.js (one control per
// format), done.js, feed.js (the notification feed), notify.js, media.js, keys.js, runs.js and runs-run.js (the runs dashboard);
// helpers.js is what they share. Every text from the server is set as text, never parsed as HTML.

import "./runs.js";
import "./bulk.js";
import "./feed.js";
import { loadOlderDone, showTab } from "./done.js";
import { applyFilter } from "./filters.js";
import { $ } from "./helpers.js";
import { onKeydown } from "./keys.js";
import { renderRows, schedule, select } from "./list.js";
import { toggleNotify } from "./notify.js";
import { openControls, tickCard } from "./question.js";
import { token } from "./session.js";
import { showSignIn, showView, signIn, signOut } from "./signin.js";
import { openCard } from "./state.js";

window.addEventListener("hashchange", showView);
document.addEventListener("layby:unauthorized", (e) => showSignIn((e.detail && e.detail.message) || "The token is no longer accepted."));
document.addEventListener("keydown", onKeydown);

setInterval(() => {
  if (!$("inbox").hidden) renderRows();
  const card = openCard();
  if (card) tickCard(card);
}, 1000);

$("sign-in-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const value = $("token").value.trim();
  if (!value) return showSignIn("Enter a token.");
  signIn(value);
});
$("sign-out").addEventListener("click", signOut);
$("notify").addEventListener("click", toggleNotify);
$("rows").addEventListener("scroll", () => renderRows(), { passive: true });
$("rows").addEventListener("click", (e) => {
  const node = e.target.closest && e.target.closest(".row");
  if (node) select(node.dataset.id, { focusList: true });
});
$("rows").addEventListener("dblclick", (e) => {
  if (e.target.closest && e.target.closest(".row")) openControls();
});
$("search").addEventListener("input", applyFilter);
for (const id of ["filter-format", "filter-group", "filter-source", "sort"]) $(id).addEventListener("change", applyFilter);
$("tab-pending").addEventListener("click", () => showTab("pending"));
$("tab-done").addEventListener("click", () => showTab("done"));
$("done-more").addEventListener("click", loadOlderDone);
window.addEventListener("resize", () => schedule());

if (token()) signIn(token());
else showSignIn("");
