// A question's media, above its controls: images inline, video and audio players, documents as
// downloads named by `filename`, links that open in a new tab (docs/asking.md#media-urls says
// which URLs reach the page; the CSP allows exactly those).

import { el } from "./helpers.js";

const BUILD = {
  image: (m, caption) => el("img", { src: m.url, alt: caption, loading: "lazy" }),
  video: (m, caption) => el("video", { src: m.url, controls: true, preload: "metadata", "aria-label": caption || "video" }),
  audio: (m, caption) => el("audio", { src: m.url, controls: true, preload: "metadata", "aria-label": caption || "audio" }),
  document: (m, caption) => el("a", { href: m.url, download: m.filename || "", rel: "noopener noreferrer", text: caption || m.filename || "Document" }),
};

function link(m, caption) {
  return el("a", { href: m.url, target: "_blank", rel: "noopener noreferrer", text: caption || m.url });
}

export function buildMedia(media) {
  const box = el("div", { class: "media" });
  for (const m of media) box.append((BUILD[m.kind] || link)(m, m.caption || ""));
  return box;
}
