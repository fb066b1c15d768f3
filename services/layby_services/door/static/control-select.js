// select: one radio button per option and an Answer button; 1 – 9 choose that option and answer.

import { showError, submit } from "./answer.js";
import { el } from "./helpers.js";

export const select = {
  build(card, payload) {
    const id = card.item.interaction_id;
    const form = el("form", { novalidate: true });
    const set = el("fieldset", {}, el("legend", { text: "Choose one" }));
    (payload.options || []).forEach((opt, i) => {
      const inputId = `${id}-opt-${i}`;
      set.append(
        el("label", { class: "choice", for: inputId },
          el("input", { type: "radio", name: "choice", id: inputId, value: opt, required: true }),
          document.createTextNode(opt)),
      );
    });
    form.append(set, el("div", { class: "actions" }, el("button", { type: "submit", text: "Answer" })));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const chosen = form.querySelector("input[name=choice]:checked");
      if (!chosen) return showError(card, "Choose one of the options.", null);
      submit(card, chosen.value);
    });
    return form;
  },
  key(card, e) {
    if (!/^[1-9]$/.test(e.key)) return;
    const options = (card.item.format_payload || {}).options || [];
    const choice = options[Number(e.key) - 1];
    if (choice === undefined) return;
    e.preventDefault();
    submit(card, choice);
  },
};
