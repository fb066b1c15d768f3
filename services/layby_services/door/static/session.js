// The bearer token the person signed in with, shared by the inbox and the runs dashboard. It is
// kept in this tab's sessionStorage only (never localStorage or a cookie) and sent as
// `Authorization: Bearer <token>` (docs/doors/inbox-page.md#sign-in-and-the-token).

const TOKEN_KEY = "layby.token";

let current = sessionStorage.getItem(TOKEN_KEY);

export function token() {
  return current;
}

// The token being tried: used for requests, kept only once a door accepted it (keepToken).
export function useToken(value) {
  current = value;
}

export function keepToken() {
  if (current) sessionStorage.setItem(TOKEN_KEY, current);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  current = null;
}

export function authHeaders(extra = {}) {
  return { Authorization: `Bearer ${current}`, ...extra };
}
