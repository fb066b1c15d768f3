// What every module of the page shares (the inbox and the runs dashboard): building the DOM,
// page events, ordering, and durations in words.

export const $ = (id) => document.getElementById(id);

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

// A page event: how the inbox tells the runs dashboard about the session, the view and frames.
export function emit(name, detail = {}) {
  document.dispatchEvent(new CustomEvent(name, { detail }));
}

export function cmp(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

// A length of time in words: its largest unit and the next one, the next one left out when it is
// zero (45s, 3m 20s, 3m, 2h 5m, 1d 4h). `seconds: false` leaves seconds out past the first minute
// (59m), for a view redrawn every few seconds rather than every second. The sign is ignored: the
// caller says "ago", "left" or "in".
export function duration(ms, { seconds = true } = {}) {
  const s = Math.round(Math.abs(ms) / 1000);
  const two = (big, bigUnit, small, smallUnit) => (small ? `${big}${bigUnit} ${small}${smallUnit}` : `${big}${bigUnit}`);
  if (s < 60) return `${s}s`;
  if (s < 3600) return two(Math.floor(s / 60), "m", seconds ? s % 60 : 0, "s");
  if (s < 86400) return two(Math.floor(s / 3600), "h", Math.floor((s % 3600) / 60), "m");
  return two(Math.floor(s / 86400), "d", Math.floor((s % 86400) / 3600), "h");
}
