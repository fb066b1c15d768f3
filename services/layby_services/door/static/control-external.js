// external: a link to the outside page (when the question has one) and a note that the answer
// comes from the outside system, marked as signature-verified when `server_verified` is set.

import { el } from "./helpers.js";

export const external = {
  build(card, payload) {
    const wrap = el("div", { class: "external" });
    if (payload.url) {
      wrap.append(el("a", { href: payload.url, target: "_blank", rel: "noopener noreferrer", text: "Open the page to act on" }));
    }
    wrap.append(el("p", { class: "hint", text: card.item.server_verified
      ? "The answer arrives from the outside system (signature verified)."
      : "The answer arrives from the outside system." }));
    return wrap;
  },
};
