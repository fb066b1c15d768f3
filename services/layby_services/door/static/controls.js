// The control of each answer format, one module each, looked up by the question's format
// (docs/doors/inbox-page.md#controls-per-format). A control is {build(card, payload) -> element},
// and may take keys: key(card, event) answers from the keyboard when the key is its own.

import { confirm } from "./control-confirm.js";
import { external } from "./control-external.js";
import { form } from "./control-form.js";
import { review } from "./control-review.js";
import { select } from "./control-select.js";
import { text } from "./control-text.js";

const CONTROLS = { text, confirm, select, form, external, review };

export function buildControl(card) {
  // A format this page does not know yet is answered as text, which every door accepts as a value.
  const control = CONTROLS[card.item.answer_format] || CONTROLS.text;
  return control.build(card, card.item.format_payload || {});
}

// A key pressed with a pending question open and no field focused (y / n, 1 – 9).
export function controlKey(card, event) {
  const control = CONTROLS[card.item.answer_format];
  if (control && control.key) control.key(card, event);
}
