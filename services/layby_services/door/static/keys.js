// The keyboard (docs/doors/inbox-page.md#keyboard): j / k move between questions, Enter goes to
// the open question's controls, the control of its format takes its own keys (y / n, 1 – 9),
// Ctrl/Cmd+Enter sends the form being filled in, / goes to the search, Escape goes back to the
// list, ? shows the list of shortcuts. Typing in a field is never taken for a shortcut.

import { controlKey } from "./controls.js";
import { showTab } from "./done.js";
import { $, el } from "./helpers.js";
import { move } from "./list.js";
import { openControls } from "./question.js";
import { openCard, state } from "./state.js";

const SHORTCUTS = [
  ["j / k", "next / previous question"],
  ["Enter", "go to the answer controls of the open question"],
  ["y / n", "answer Yes / No"],
  ["1 – 9", "choose that option and answer"],
  ["Ctrl+Enter / ⌘+Enter", "send the answer being filled in"],
  ["/", "search"],
  ["Escape", "back to the list"],
  ["?", "show or hide this list"],
];

function toggleHelp() {
  let help = $("shortcuts");
  if (!help) {
    help = el("section", { id: "shortcuts", class: "shortcuts", "aria-label": "Keyboard shortcuts", hidden: true },
      el("h2", { text: "Keyboard shortcuts" }));
    const list = el("dl");
    for (const [key, what] of SHORTCUTS) list.append(el("dt", {}, el("kbd", { text: key })), el("dd", { text: what }));
    help.append(list);
    $("inbox").prepend(help);
  }
  help.hidden = !help.hidden;
}

export function onKeydown(e) {
  if ($("inbox").hidden) return;
  const typing = e.target.closest && e.target.closest("input, textarea, select, [contenteditable]");
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
    const form = e.target.closest && e.target.closest("article.card form");
    if (form) {
      e.preventDefault();
      form.requestSubmit();
    }
    return;
  }
  if (e.key === "Escape") {
    e.preventDefault();
    $("rows").focus({ preventScroll: true });
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "j" || e.key === "k") {
    e.preventDefault();
    if (state.tab !== "pending") showTab("pending");
    move(e.key === "j" ? 1 : -1);
    return;
  }
  if (e.key === "?") {
    e.preventDefault();
    toggleHelp();
    return;
  }
  if (e.key === "/") {
    e.preventDefault();
    $("search").focus();
    return;
  }
  const card = openCard();
  if (!card || card.status !== "pending" || state.tab !== "pending") return;
  // Buttons and links keep their own Enter; anywhere else Enter opens the controls.
  if (e.key === "Enter") {
    if (e.target.closest && e.target.closest("button, a, article.card")) return;
    e.preventDefault();
    openControls();
    return;
  }
  controlKey(card, e);
}
