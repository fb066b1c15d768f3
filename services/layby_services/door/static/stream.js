// The stream client: the interaction stream read with `fetch` (an EventSource cannot send the
// token header) and a small SSE parser. On every (re)connect the list is loaded again at least as
// far as the stream's start; a dropped stream reconnects after 0.5 s, doubling up to 10 s, with
// Last-Event-ID (docs/doors/inbox-page.md#loading-every-pending-question).

import { applyFrame, loadAll } from "./model.js";
import { authHeaders } from "./session.js";
import { setStatus, showSignIn } from "./signin.js";
import { state } from "./state.js";

export function stopStream() {
  if (state.abort) state.abort.abort();
  state.abort = null;
}

export async function startStream() {
  stopStream();
  const abort = new AbortController();
  state.abort = abort;
  let delay = 500;
  while (!abort.signal.aborted) {
    try {
      const extra = state.lastEventId ? { "Last-Event-ID": state.lastEventId } : {};
      const resp = await fetch("/api/interactions/stream", {
        headers: authHeaders({ Accept: "text/event-stream", ...extra }),
        signal: abort.signal,
        cache: "no-store",
      });
      if (resp.status === 401) {
        showSignIn("The token is no longer accepted.");
        return;
      }
      if (!resp.ok || !resp.body) throw new Error(`stream ${resp.status}`);
      // The stream's frames follow this sequence; the list is loaded at least that far, so a
      // question recorded between the two is in one or the other (frames wait in the body).
      const from = Number(resp.headers.get("Layby-Stream-Seq"));
      loadAll(Number.isNaN(from) ? null : from);
      setStatus("Live");
      delay = 500;
      await readEvents(resp.body, abort.signal);
    } catch (err) {
      if (abort.signal.aborted) return;
    }
    setStatus("Reconnecting…");
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10000);
  }
}

async function readEvents(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let frame = {};
  while (!signal.aborted) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, cut).replace(/\r$/, "");
      buffer = buffer.slice(cut + 1);
      if (line === "") {
        if (frame.data !== undefined) applyFrame(frame);
        frame = {};
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const key = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        frame[key] = key === "data" && frame.data !== undefined ? `${frame.data}\n${val}` : val;
      }
    }
  }
}
