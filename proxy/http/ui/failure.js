// What a view shows when its fetch fails.

import { ApiError, forgetKey } from "./api.js";
import { message, replace } from "./dom.js";

export const SIGNED_OUT = "ctxproxy:signed-out";

/** A rejected key signs out (the shell shows the login form again) unless `keepKey` (a route
 * the key may not read, though it is a good key elsewhere); any other failure is shown in
 * `root`, where the data would have been. */
export function failed(root, error, keepKey = false) {
  if (!keepKey && error instanceof ApiError && error.status === 401) {
    forgetKey();
    window.dispatchEvent(new Event(SIGNED_OUT));
    return;
  }
  const code = error instanceof ApiError && error.code ? ` (${error.code})` : "";
  replace(root, message(`${error.message || String(error)}${code}`, "error"));
}
