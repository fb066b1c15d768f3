// confirm: Yes and No buttons; y / n answer from the keyboard.

import { submit } from "./answer.js";
import { el } from "./helpers.js";

export const confirm = {
  build(card) {
    const wrap = el("div", { class: "actions", role: "group", "aria-label": "Answer" });
    wrap.append(
      el("button", { type: "button", onclick: () => submit(card, true), text: "Yes" }),
      el("button", { type: "button", class: "secondary", onclick: () => submit(card, false), text: "No" }),
    );
    return wrap;
  },
  key(card, e) {
    if (e.key !== "y" && e.key !== "n") return;
    e.preventDefault();
    submit(card, e.key === "y");
  },
};
