// Savings per tenant and policy: tokens and money saved, the cached share of the upstream's
// input over time, refusals by reason.

import { getJson } from "./api.js";
import { el, field, filterForm, replace, route, table } from "./dom.js";
import { failed } from "./failure.js";
import { int, percent, savedShare, usd } from "./format.js";
import { legend, timeChart } from "./chart.js";

const CACHE_LINES = [
  { field: "input_tokens", kind: "input", label: "upstream input tokens", area: false },
  { field: "cached_input_tokens", kind: "cached", label: "of them cached", area: true },
];
const SAVING_LINES = [
  { field: "tokens_before", kind: "before", label: "tokens before", area: false },
  { field: "tokens_after", kind: "after", label: "tokens after", area: true },
];

export function statsView(root, query) {
  const tenant = query.get("tenant") || "";
  const policy = query.get("policy") || "";
  const body = el("div", null, el("p", { class: "muted" }, "Loading…"));
  root.append(filters(tenant, policy), body);
  let stopped = false;
  getJson("/v1/context/stats", { tenant, policy })
    .then((stats) => {
      if (stopped) return;
      const groups = stats.groups || [];
      const none = el("p", { class: "muted" }, "No requests recorded yet.");
      replace(body, groups.length ? groups.map(group) : none);
    })
    .catch((error) => {
      if (!stopped) failed(body, error);
    });
  return () => {
    stopped = true;
  };
}

function filters(tenant, policy) {
  const children = [field("tenant", tenant, 12), field("policy", policy, 12),
    el("button", { type: "submit" }, "Show")];
  return filterForm("filters toolbar", children, (values) => {
    window.location.hash = route(["stats"], values);
  });
}

function group(g) {
  const share = savedShare(g.tokens_before, g.tokens_after);
  const refusals = Object.entries(g.refusals || {}).sort((a, b) => b[1] - a[1]);
  return el("section", { class: "panel stats-group" },
    el("h2", null, `${g.tenant} · ${g.policy}`),
    el("div", { class: "kpis" },
      kpi("requests", int(g.requests)),
      kpi("tokens saved", int(g.tokens_saved),
        share === null ? "" : `${percent(share)} of ${int(g.tokens_before)}`),
      kpi("money saved", usd(g.saved_usd), g.cost_usd == null ? "" : `spent ${usd(g.cost_usd)}`),
      kpi("cached share", percent(g.cached_share),
        `${int(g.cached_input_tokens)} of ${int(g.input_tokens)} input`),
      kpi("refusals", int(refusals.reduce((sum, [, n]) => sum + n, 0)))),
    el("div", { class: "charts" },
      el("figure", null, timeChart(g.series || [], CACHE_LINES, "upstream input and cached tokens"),
        el("figcaption", null, legend(CACHE_LINES))),
      el("figure", null,
        timeChart(g.series || [], SAVING_LINES, "tokens before and after preparation"),
        el("figcaption", null, legend(SAVING_LINES)))),
    refusals.length
      ? table(["refusal reason", ["requests", "num"]], refusals.map(([reason, n]) =>
        el("tr", null, el("td", { class: "mono" }, reason), el("td", { class: "num" }, int(n)))))
      : el("p", { class: "muted" }, "No refusals."));
}

function kpi(label, value, note) {
  return el("div", { class: "kpi" }, el("div", { class: "kpi-value" }, value),
    el("div", { class: "kpi-label" }, label), note ? el("div", { class: "kpi-note" }, note) : null);
}

