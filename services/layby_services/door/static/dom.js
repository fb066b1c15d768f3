// What both modules of the page build their DOM with (inbox.js, runs.js).

// An element with attributes and children. `text` sets the text (never parsed as HTML), `class`
// the class list, `on<event>` a listener; false, null and undefined leave an attribute out. A
// string child becomes a text node.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child) node.append(typeof child === "string" ? document.createTextNode(child) : child);
  return node;
}
