// Browser notifications: "Notify me" asks for permission; once granted, a question that arrives
// while the tab is in the background shows a notification (its text, at most 200 characters;
// clicking it opens that question). The choice is kept for the tab's session
// (docs/doors/inbox-page.md#notifications).

import { $ } from "./helpers.js";
import { select } from "./list.js";
import { setStatus } from "./signin.js";

const NOTIFY_KEY = "layby.notify";

export function updateNotifyButton() {
  const on = sessionStorage.getItem(NOTIFY_KEY) === "1" && "Notification" in window && Notification.permission === "granted";
  $("notify").textContent = on ? "Notifications on" : "Notify me";
  $("notify").setAttribute("aria-pressed", on ? "true" : "false");
}

export async function toggleNotify() {
  if (!("Notification" in window)) return;
  if (sessionStorage.getItem(NOTIFY_KEY) === "1") {
    sessionStorage.removeItem(NOTIFY_KEY);
  } else {
    const permission = Notification.permission === "granted" ? "granted" : await Notification.requestPermission();
    if (permission === "granted") sessionStorage.setItem(NOTIFY_KEY, "1");
    else setStatus("Notifications are blocked for this page in the browser's settings.");
  }
  updateNotifyButton();
}

export function notifyNew(item) {
  if (!document.hidden || sessionStorage.getItem(NOTIFY_KEY) !== "1") return;
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const note = new Notification("New question in Layby", { body: item.question.slice(0, 200), tag: item.interaction_id });
  note.addEventListener("click", () => {
    window.focus();
    select(item.interaction_id);
  });
}
