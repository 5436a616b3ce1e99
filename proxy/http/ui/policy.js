// The effective policy for a model (after `extends:` and the model overrides), read-only.

import { getJson } from "./api.js";
import { el, field, filterForm, replace, route } from "./dom.js";
import { failed } from "./failure.js";
import { yaml } from "./yaml.js";

export function policyView(root, query) {
  const model = query.get("model") || "";
  const policy = query.get("policy") || "";
  const body = el("div");
  const children = [
    field("model", model, 24, "model, e.g. gpt-4o"),
    field("policy", policy, 16, "policy (operator)"),
    el("button", { type: "submit" }, "Show"),
  ];
  const form = filterForm("filters toolbar", children, (values) => {
    window.location.hash = route(["policy"], values);
  });
  root.append(form, body);
  let stopped = false;
  getJson("/v1/context/policy", { model, policy })
    .then((answer) => {
      if (stopped) return;
      replace(body, el("section", { class: "panel" },
        el("h2", null, `Policy ${answer.policy}${answer.model ? ` for ${answer.model}` : ""}`),
        el("p", { class: "muted" }, "Read-only: the policy file after extends:",
          answer.model ? " and the overrides for this model" : " (name a model for its overrides)",
          ". Edit the file to change it; the proxy reloads it on its own."),
        el("pre", { class: "content policy", id: "policy-json" },
          yaml(answer.effective))));
    })
    .catch((error) => {
      if (!stopped) failed(body, error);
    });
  return () => {
    stopped = true;
  };
}
