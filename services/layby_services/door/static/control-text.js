// text: a text area, with the suggested replies as one-tap buttons that submit their own text.

import { submit } from "./answer.js";
import { el } from "./helpers.js";

export const text = {
  build(card, payload) {
    const form = el("form", { novalidate: true });
    const inputId = `${card.item.interaction_id}-text`;
    form.append(el("label", { for: inputId, text: "Your answer" }));
    const area = el("textarea", { id: inputId, name: "answer" });
    form.append(area);
    if (payload.options && payload.options.length) {
      const chips = el("div", { class: "chips", role: "group", "aria-label": "Suggested replies" });
      for (const opt of payload.options) chips.append(el("button", { type: "button", onclick: () => submit(card, opt), text: opt }));
      form.append(chips);
    }
    form.append(el("div", { class: "actions" }, el("button", { type: "submit", text: "Answer" })));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      submit(card, area.value);
    });
    return form;
  },
};
