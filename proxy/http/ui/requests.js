// The request list: newest first, filtered, polled while it shows the newest page.

import { getJson } from "./api.js";
import { actionBadge, outcomeBadge } from "./badges.js";
import { el, field, filterForm, replace, route, table } from "./dom.js";
import { failed } from "./failure.js";
import { compact, ms, percent, savedShare, usd, when } from "./format.js";

const POLL_MS = 2000;
const PAGE = 50;
const FILTERS = ["outcome", "status", "model", "session", "tenant"];
const OUTCOMES = ["", "ok", "refused", "upstream_error", "error", "cancelled"];
const HEADERS = [
  "time", "tenant", "model", "policy", "outcome", ["tokens before → after", "num"],
  ["saved", "num"], "actions", ["latency", "num"], ["$ saved", "num"],
];

export function requestListView(root, query) {
  const filters = Object.fromEntries(FILTERS.map((name) => [name, query.get(name) || ""]));
  const before = query.get("before") || "";
  const rows = el("tbody");
  const state = el("span", { class: "muted", id: "list-state" });
  const pager = el("div", { class: "pager" });
  const live = el("input", { type: "checkbox", id: "live", checked: !before, disabled: !!before });
  const list = table(HEADERS, [], "grid requests");
  list.replaceChild(rows, list.tBodies[0]);
  root.append(
    el("div", { class: "toolbar" }, filterBar(filters), el("span", { class: "spacer" }),
      el("label", { class: "live" }, live, " live"), state),
    list,
    pager,
  );
  let timer = null;
  let stopped = false;
  async function load(first = false) {
    if (document.hidden && !first) return schedule(); // a background tab polls nothing
    try {
      const page = await getJson("/v1/context/requests", { ...filters, before, limit: PAGE });
      if (stopped) return;
      replace(rows, ...page.data.map(row));
      if (!page.data.length) rows.append(emptyRow());
      replace(pager, ...pagerLinks(filters, before, page));
      state.textContent = `${page.data.length} shown · updated ${when(Date.now() / 1000)}`;
    } catch (error) {
      if (!stopped) failed(state, error);
    }
    schedule();
  }
  function schedule() {
    clearTimeout(timer);
    if (!stopped && live.checked) timer = setTimeout(load, POLL_MS);
  }
  const shown = () => {
    if (!document.hidden && live.checked) load();
  };
  live.addEventListener("change", schedule);
  document.addEventListener("visibilitychange", shown);
  load(true);
  return () => {
    stopped = true;
    clearTimeout(timer);
    document.removeEventListener("visibilitychange", shown);
  };
}

function filterBar(values) {
  const option = (o) =>
    el("option", { value: o, selected: o === values.outcome }, o || "any outcome");
  const outcome = el("select", { name: "outcome", "aria-label": "outcome" }, OUTCOMES.map(option));
  const inputs = ["status", "model", "session", "tenant"].map((name) =>
    field(name, values[name], name === "status" ? 4 : 12));
  const children = [outcome, inputs, el("button", { type: "submit" }, "Filter")];
  const form = filterForm("filters", children, (chosen) => {
    window.location.hash = route(["requests"], chosen);
  });
  outcome.addEventListener("change", () => form.requestSubmit());
  return form;
}

function row(summary) {
  const link = route(["requests", summary.request_id]);
  const share = savedShare(summary.tokens_before, summary.tokens_after);
  const cost = summary.cost || {};
  const tr = el("tr", { class: "clickable", "data-request-id": summary.request_id },
    el("td", { class: "nowrap" }, el("a", { href: link }, when(summary.time))),
    el("td", null, summary.tenant),
    el("td", null, summary.model),
    el("td", null, summary.policy),
    el("td", null, outcomeBadge(summary.outcome, summary.status)),
    el("td", { class: "num nowrap" }, tokens(summary)),
    el("td", { class: "num" }, share === null ? "–" : percent(share)),
    el("td", { class: "actions" }, (summary.actions || []).map((a) => actionBadge(a))),
    el("td", { class: "num" }, ms(summary.latency_ms)),
    el("td", { class: "num" }, usd(cost.saved_usd)),
  );
  tr.addEventListener("click", (event) => {
    if (event.target.closest("a") === null) window.location.hash = link;
  });
  return tr;
}

function tokens(summary) {
  const before = compact(summary.tokens_before);
  if (summary.tokens_after === summary.tokens_before) return before;
  return [before, el("span", { class: "arrow" }, " → "), compact(summary.tokens_after)];
}

function emptyRow() {
  return el("tr", null, el("td", { colspan: HEADERS.length, class: "muted" },
    "No requests recorded yet: they appear here as they are made."));
}

function pagerLinks(filters, before, page) {
  const links = [];
  if (before) links.push(el("a", { href: route(["requests"], filters) }, "← newest"));
  if (page.has_more && page.data.length) {
    const last = page.data[page.data.length - 1].request_id;
    links.push(el("a", { href: route(["requests"], { ...filters, before: last }) }, "older →"));
  }
  return links;
}
