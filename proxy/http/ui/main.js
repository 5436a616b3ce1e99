// The console's shell: the login form, the navigation and the view chosen by the URL fragment.

import { ApiError, forgetKey, getJson, saveKey, savedKey } from "./api.js";
import { el, message } from "./dom.js";
import { SIGNED_OUT } from "./failure.js";
import { artifactView } from "./artifact.js";
import { policyView } from "./policy.js";
import { requestListView } from "./requests.js";
import { requestView } from "./request.js";
import { statsView } from "./stats.js";

const part = (match) => decodeURIComponent(match[1]);
const VIEWS = [
  [/^requests\/([^/]+)$/, "requests", (root, m, q) => requestView(root, part(m), q)],
  [/^artifacts\/([^/]+)$/, "requests", (root, m, q) => artifactView(root, part(m), q)],
  [/^stats$/, "stats", (root, m, q) => statsView(root, q)],
  [/^policy$/, "policy", (root, m, q) => policyView(root, q)],
  [/^(requests)?$/, "requests", (root, m, q) => requestListView(root, q)],
];

let leave = null; // what the current view stops when another replaces it (its polling)

function parseHash() {
  const hash = window.location.hash.replace(/^#\/?/, "");
  const [path, query] = hash.split("?", 2);
  return { path, query: new URLSearchParams(query || "") };
}

function show() {
  if (leave) leave();
  leave = null;
  const root = document.getElementById("view");
  root.replaceChildren();
  if (!savedKey()) {
    chrome(false);
    loginView(root);
    return;
  }
  chrome(true);
  const { path, query } = parseHash();
  for (const [pattern, section, view] of VIEWS) {
    const match = path.match(pattern);
    if (match) {
      highlight(section);
      leave = view(root, match, query) || null;
      return;
    }
  }
  root.append(message("No such view.", "error"));
}

function chrome(loggedIn) {
  document.getElementById("nav").hidden = !loggedIn;
  document.getElementById("logout").hidden = !loggedIn;
  const key = savedKey();
  // the last characters of a long key tell two keys apart; a short one is not shown at all
  const hint = key && key.length >= 16 ? ` …${key.slice(-4)}` : "";
  document.getElementById("who").textContent = loggedIn ? `signed in${hint}` : "";
}

function highlight(section) {
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.view === section);
  }
}

function loginView(root) {
  const input = el("input", {
    id: "key", type: "password", autocomplete: "off", required: true,
    placeholder: "proxy key or operator key", "aria-label": "key",
  });
  const problem = el("p", { class: "error", role: "alert" });
  const form = el(
    "form", { id: "login", class: "login" },
    el("h1", null, "ctxproxy console"),
    el("p", { class: "muted" },
      "Sign in with a tenant's proxy key (its own requests) or an operator key (every tenant). ",
      "The key stays in this tab's session storage."),
    input,
    el("button", { type: "submit" }, "Sign in"),
    problem,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    signIn(input.value.trim(), problem);
  });
  root.append(form);
  input.focus();
}

async function signIn(key, problem) {
  if (!key) return;
  saveKey(key);
  try {
    await getJson("/v1/context/requests", { limit: 1 });
  } catch (error) {
    forgetKey();
    const denied = error instanceof ApiError && (error.status === 401 || error.status === 403);
    problem.textContent = denied ? "That key is not accepted." : `Sign-in failed: ${error.message}`;
    return;
  }
  if (!window.location.hash || window.location.hash === "#/") window.location.hash = "#/requests";
  show();
}

document.getElementById("logout").addEventListener("click", () => {
  forgetKey();
  show();
});
window.addEventListener("hashchange", show);
window.addEventListener(SIGNED_OUT, show);
show();
