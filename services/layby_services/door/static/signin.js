// Signing in and out, and which view is shown: the inbox (#inbox, the default) or the runs
// dashboard (#runs, runs.js). The token itself lives in session.js.

import { loadDone } from "./done.js";
import { $, emit } from "./helpers.js";
import { schedule } from "./list.js";
import { rebase } from "./model.js";
import { updateNotifyButton } from "./notify.js";
import { authHeaders, forgetToken, keepToken, token, useToken } from "./session.js";
import { state } from "./state.js";
import { startStream, stopStream } from "./stream.js";

export function setStatus(text) {
  $("status").textContent = text;
}

export function showSignIn(message) {
  stopStream();
  state.loading = 0;
  $("inbox").hidden = true;
  $("runs").hidden = true;
  $("views").hidden = true;
  $("sign-out").hidden = true;
  $("notify").hidden = true;
  $("sign-in").hidden = false;
  const err = $("sign-in-error");
  err.hidden = !message;
  err.textContent = message || "";
  $("token").focus();
}

export async function signIn(value) {
  useToken(value);
  // One probe checks the token before anything is shown; the stream's own load follows.
  let resp;
  try {
    resp = await fetch("/api/interactions?page=1&pageSize=1", { headers: authHeaders(), cache: "no-store" });
  } catch {
    setStatus("The server cannot be reached; retrying…");
    setTimeout(() => signIn(value), 2000);
    return;
  }
  if (resp.status === 401) return showSignIn("That token was refused.");
  if (!resp.ok) {
    setStatus(`The inbox could not be loaded (${resp.status}).`);
    return;
  }
  const body = await resp.json();
  rebase(body.data.total, Number(resp.headers.get("Layby-Stream-Seq")) || 0);
  keepToken();
  $("sign-in").hidden = true;
  $("sign-out").hidden = false;
  $("views").hidden = false;
  $("notify").hidden = !("Notification" in window);
  updateNotifyButton();
  emit("layby:signed-in", { token: value });
  showView();
  schedule();
  loadDone();
  startStream();
}

export function signOut() {
  forgetToken();
  state.cards.clear();
  state.resolved.clear();
  state.known.clear();
  state.decremented.clear();
  state.incremented.clear();
  state.done = [];
  state.selected = null;
  state.loaded = false;
  state.base = { total: 0, seq: -1 };
  state.frames = [];
  state.dirty = true;
  $("detail").replaceChildren();
  emit("layby:signed-out");
  showSignIn("");
}

function currentView() {
  return location.hash === "#runs" ? "runs" : "inbox";
}

export function showView() {
  if (!token()) return;
  const view = currentView();
  $("inbox").hidden = view !== "inbox";
  $("runs").hidden = view !== "runs";
  for (const [tab, name] of [["tab-inbox", "inbox"], ["tab-runs", "runs"]]) {
    if (name === view) $(tab).setAttribute("aria-current", "page");
    else $(tab).removeAttribute("aria-current");
  }
  emit("layby:view", { view });
  if (view === "inbox") schedule();
}
