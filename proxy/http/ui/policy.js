// The effective policy for a model (after `extends:` and the model overrides), read-only.

import { getJson } from "./api.js";
import { el, replace, route } from "./dom.js";
import { failed } from "./failure.js";

export function policyView(root, query) {
  const model = query.get("model") || "";
  const policy = query.get("policy") || "";
  const body = el("div");
  const form = el("form", { class: "filters toolbar" },
    el("input", { name: "model", value: model, placeholder: "model, e.g. gpt-4o", "aria-label": "model", size: 24 }),
    el("input", { name: "policy", value: policy, placeholder: "policy (operator)", "aria-label": "policy", size: 16 }),
    el("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    window.location.hash = route(["policy"], Object.fromEntries(new FormData(form).entries()));
  });
  root.append(form, body);
  let stopped = false;
  getJson("/v1/context/policy", { model, policy })
    .then((answer) => {
      if (stopped) return;
      replace(body, el("section", { class: "panel" },
        el("h2", null, answer.model ? `Policy ${answer.policy} for ${answer.model}` : `Policy ${answer.policy}`),
        el("p", { class: "muted" }, "Read-only: the policy file after extends:",
          answer.model ? " and the overrides for this model" : " (name a model to apply its overrides)",
          ". Edit the file to change it; the proxy reloads it on its own."),
        el("pre", { class: "content policy", id: "policy-json" }, JSON.stringify(answer.effective, null, 2))));
    })
    .catch((error) => {
      if (!stopped) failed(body, error);
    });
  return () => {
    stopped = true;
  };
}
