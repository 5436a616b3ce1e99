// One request: what came in, what preparation did and where, and what went upstream.

import { getJson } from "./api.js";
import { actionBadge, outcomeBadge } from "./badges.js";
import { conversationOf } from "./conversation.js";
import { artifactLink, el, facts, linkified, replace, route, table } from "./dom.js";
import { failed } from "./failure.js";
import { counted, int, ms, percent, ranges, savedShare, usd, when } from "./format.js";
import { actionsByIndex, pairedRows } from "./messages.js";

export function requestView(root, id) {
  root.append(el("p", { class: "muted" }, "Loading…"));
  let stopped = false;
  getJson(`/v1/context/requests/${encodeURIComponent(id)}`)
    .then((record) => {
      if (!stopped) replace(root, ...sections(record));
    })
    .catch((error) => {
      if (!stopped) failed(root, error);
    });
  return () => {
    stopped = true;
  };
}

function panel(title, ...children) {
  return el("section", { class: "panel" }, el("h2", null, title), children);
}

function sections(record) {
  const manifest = record.manifest || {};
  const actions = manifest.actions || [];
  const from = record.request_id;
  const compactions = actions.filter((a) => a.step === "summarize" && a.detail);
  return [
    el("div", { class: "crumbs" }, el("a", { href: route(["requests"]) }, "← requests"), " / ",
      el("span", { class: "mono" }, from), " ", outcomeBadge(record.outcome, record.status)),
    el("div", { class: "cards" }, overview(record), budget(manifest, record.error)),
    actions.length ? panel("Actions", actionTable(actions, from)) : null,
    compactions.map((a) => compaction(a, from)),
    conversation(record, actions),
    (record.rounds || []).length ? panel("Read rounds the proxy ran", rounds(record)) : null,
    panel("Response headers", facts(Object.entries(record.headers || {}).sort(), "facts mono")),
  ];
}

function tokens(record) {
  if (record.tokens_before == null) return null;
  const share = savedShare(record.tokens_before, record.tokens_after);
  const saved = share ? ` (−${percent(share)})` : "";
  return `${int(record.tokens_before)} → ${int(record.tokens_after)}${saved}`;
}

function latency(record) {
  const upstream = record.upstream_ms == null ? "" : ` (upstream ${ms(record.upstream_ms)})`;
  return `${ms(record.latency_ms)}${upstream}`;
}

function usage(record) {
  const used = record.usage;
  if (!used) return null;
  const cached = `${int(used.cached_input_tokens)} cached`;
  return `${int(used.input_tokens)} in (${cached}) · ${int(used.output_tokens)} out`;
}

function cost(record) {
  const c = record.cost;
  if (!c) return null;
  return `${usd(c.usd)} (unchanged ${usd(c.unchanged_usd)}, saved ${usd(c.saved_usd)})`;
}

function overview(record) {
  return panel("Request", facts([
    ["time", when(record.time)],
    ["tenant", record.tenant],
    ["session", record.session],
    ["route", `${record.route} (${record.format})`],
    ["model", record.model],
    ["policy", record.policy],
    ["stream", record.stream ? "yes" : "no"],
    ["status", `${record.status} ${record.outcome}`],
    ["refused because", record.reason],
    ["error", record.error ? record.error.code : null],
    ["tokens", tokens(record)],
    ["latency", latency(record)],
    ["read rounds", record.synthetic_rounds ? String(record.synthetic_rounds) : null],
    ["upstream usage", usage(record)],
    ["cost", cost(record)],
  ]));
}

/** A refusal's figures (the error's details), numbers as numbers. */
function errorDetails(error) {
  const details = (error && error.details) || {};
  const value = (v) => {
    if (typeof v === "number") return int(v);
    return typeof v === "string" ? v : JSON.stringify(v);
  };
  return facts(Object.entries(details).map(([key, v]) => [key.replaceAll("_", " "), value(v)]));
}

function budget(manifest, error) {
  if (!manifest.policy) {
    const note = error
      ? "Refused before preparation finished; the refusal's figures:"
      : "No manifest recorded.";
    return panel("Preparation", el("p", { class: "muted" }, note),
      error ? errorDetails(error) : null);
  }
  const cache = manifest.cache;
  return panel("Preparation", facts([
    ["mode", manifest.mode],
    ["outcome", manifest.outcome],
    ["window", `${int(manifest.context_window)} (${manifest.context_window_source})`],
    ["allowance", int(manifest.allowance)],
    ["trigger → target", `${int(manifest.trigger)} → ${int(manifest.target)}`],
    ["reserved output", int(manifest.reserved_output)],
    ["protected", int(manifest.protected_tokens)],
    ["counted with", manifest.counting_method],
    ["prompt cache", cache ? `${cache.state}, ${cache.applied}` : null],
    ["notes", (manifest.notes || []).join(" ")],
  ]));
}

function actionTable(actions, from) {
  const rows = actions.map((a) => el("tr", null,
    el("td", null, actionBadge(a.step)),
    el("td", { class: "num" }, counted(a.count, a.unit)),
    el("td", { class: "num" }, int(a.tokens_freed)),
    el("td", { class: "num" }, ranges(a.message_indices || []) || "–"),
    el("td", null, (a.artifact_ids || []).map((id) => artifactLink(id, from))),
    el("td", null, a.reason, deferred(a))));
  const headers = [
    "action", ["count", "num"], ["tokens freed", "num"], ["messages", "num"], "artifacts", "why",
  ];
  return table(headers, rows);
}

function deferred(action) {
  const detail = action.detail || {};
  if (action.step !== "defer_tools" || !Array.isArray(detail.deferred)) return null;
  return el("div", { class: "muted" }, `deferred: ${detail.deferred.join(", ")}`,
    (detail.loaded || []).length ? ` · loaded: ${detail.loaded.join(", ")}` : "");
}

function compaction(action, from) {
  const detail = action.detail;
  const record = detail.manifest || {};
  const archive = action.artifact_ids || [];
  const list = (values, empty) => (values && values.length
    ? el("ul", null, values.map((v) => el("li", null, linkified(String(v), from))))
    : el("p", { class: "muted" }, empty));
  return panel(`Compaction of messages ${ranges(action.message_indices || [])}`,
    facts([
      ["summary", `${detail.kind}${detail.by ? ` by ${detail.by}` : ""}, ${detail.source}`],
      ["summary tokens", int(detail.tokens)],
      ["failure", detail.failure],
      ["archived as", archive.length ? archive.map((id) => artifactLink(id, from)) : null],
    ]),
    el("div", { class: "compaction" },
      el("div", null, el("h3", null, "Kept in the summary"),
        list(record.facts_kept, "No facts kept.")),
      el("div", null, el("h3", null, "Marked superseded"),
        list(record.facts_superseded, "Nothing superseded.")),
      el("div", null, el("h3", null, "Only in the archive"),
        list(record.archive_only ? [record.archive_only] : [],
          "Nothing the summary leaves out (the originals stay in the archive)."))));
}

function conversation(record, actions) {
  const from = record.request_id;
  if (record.bodies === "kept" && record.original) {
    const original = conversationOf(record.format, record.original);
    const prepared = conversationOf(record.format, record.prepared || record.original);
    return panel("Conversation",
      tools(original.tools, prepared.tools),
      el("div", { class: "side-by-side" },
        el("h3", null, `Original · ${original.items.length} items`),
        el("h3", null, `Prepared · ${prepared.items.length} items`),
        pairedRows(original, prepared, actions, from).map(([l, r]) => [
          el("div", { class: "cell original" }, l), el("div", { class: "cell prepared" }, r)])));
  }
  const why = record.bodies === "too_large"
    ? "The bodies were over the policy's size limit for records, so they were not kept."
    : "No bodies in this record: a policy keeps them with records: {bodies: true}, "
      + "and a request refused before it was prepared has none.";
  const note = el("p", { class: "muted" }, why);
  return panel("Actions by message index", note, actionsByIndex(actions, from));
}

function tools(original, prepared) {
  if (!original.length && !prepared.length) return null;
  const sent = new Set(prepared);
  const tool = (n, kind) => el("span", { class: `tool ${kind}` }, n);
  const names = original.map((n) => tool(n, sent.has(n) ? "" : "deferred"));
  const added = prepared.filter((n) => !original.includes(n)).map((n) => tool(n, "added"));
  const counts = `Tools: ${original.length} from the client, ${prepared.length} upstream `;
  return el("p", { class: "tools" }, counts,
    names, added.length ? [" + ", added] : null);
}

function rounds(record) {
  const rows = record.rounds.map((r, i) => el("tr", null,
    el("td", { class: "num" }, String(r.round || i + 1)),
    el("td", null, r.tool),
    el("td", null, el("code", null, JSON.stringify(r.arguments))),
    el("td", null, r.artifact_id ? artifactLink(r.artifact_id, record.request_id) : "–"),
    el("td", { class: "num" }, int(r.result_chars))));
  return table([["round", "num"], "tool", "arguments", "artifact", ["result chars", "num"]], rows);
}
