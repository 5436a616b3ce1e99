// The console's one way to the proxy: the operator's key as a Bearer token on every fetch.

const KEY = "ctxproxy.console.key";

export function savedKey() {
  return sessionStorage.getItem(KEY);
}

export function saveKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function url(path, params) {
  const target = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") {
      target.searchParams.set(key, String(value));
    }
  }
  return target;
}

/** GET a JSON answer of the proxy's API; an error answer throws `ApiError` with its envelope's
 * code and message. */
export async function getJson(path, params) {
  const response = await fetch(url(path, params), {
    headers: { Authorization: `Bearer ${savedKey() || ""}`, Accept: "application/json" },
    cache: "no-store",
    credentials: "omit",
    redirect: "error",
  });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const error = (body && body.error) || {};
    const text = typeof error.message === "string" ? error.message : `HTTP ${response.status}`;
    throw new ApiError(response.status, String(error.code || error.type || ""), text);
  }
  return body;
}
