// The two columns of the request view: the original conversation with each action marked on
// the messages it applied to, and the prepared conversation as it went upstream.

import { ACTION_LABELS, actionBadge } from "./badges.js";
import { isProxyText } from "./conversation.js";
import { artifactLink, el, linkified } from "./dom.js";
import { counted, int, ranges } from "./format.js";

const SPANS = new Set(["drop_turns", "summarize"]); // steps that remove a run of messages

function safe(value) {
  return String(value).replace(/[^a-z0-9_-]/gi, "");
}

function size(item) {
  return item.parts.reduce((sum, p) => sum + p.text.length + p.cut, 0);
}

function partNode(p, from) {
  const label = p.label ? el("div", { class: `part-label part-${p.kind}` }, p.label) : null;
  const more = `… ${int(p.cut)} more characters not shown`;
  const cut = p.cut ? el("div", { class: "muted" }, more) : null;
  const text = p.text ? el("pre", { class: "content" }, linkified(p.text, from)) : null;
  return el("div", { class: "part" }, label, text, cut);
}

/** One message: its index, role, label, marks and parts. */
export function messageNode(index, item, marks, from, extra) {
  const steps = marks.map((m) => `act-${safe(m.step)}`);
  const classes = ["msg", `role-${safe(item.role)}`, ...steps, extra || ""].join(" ");
  return el(
    "article",
    { class: classes, "data-index": index },
    el("header", null,
      el("span", { class: "idx" }, index === null ? "·" : `#${index}`),
      el("span", { class: "role" }, item.role),
      item.label ? el("span", { class: "label" }, item.label) : null,
      marks.map((m) => markNode(m, from)),
      el("span", { class: "size" }, `${int(size(item))} chars`)),
    item.parts.map((p) => partNode(p, from)),
  );
}

function markNode(mark, from) {
  const links = (mark.artifact_ids || []).map((id) => artifactLink(id, from));
  const to = links.length ? [" → ", links] : null;
  return el("span", { class: "mark" }, actionBadge(mark.step), to);
}

/** Message index -> the actions that list it. */
export function marksByIndex(actions) {
  const marks = new Map();
  for (const action of actions) {
    for (const index of action.message_indices || []) {
      if (!marks.has(index)) marks.set(index, []);
      marks.get(index).push(action);
    }
  }
  return marks;
}

function spanNode(action, first, last, items, marks, from) {
  const label = ACTION_LABELS[action.step] || action.step;
  const summary = el("summary", { class: `span-line act-${safe(action.step)}` },
    actionBadge(action.step),
    ` messages ${first}–${last} ${label}`,
    action.count ? ` (${counted(action.count, action.unit)})` : "",
    ` · ${int(action.tokens_freed)} tokens freed`,
    archived(action.artifact_ids || [], from));
  const body = [];
  for (let k = first; k <= last; k += 1) {
    body.push(messageNode(k, items[k], marks.get(k) || [], from));
  }
  const span = { class: `span act-${safe(action.step)}`, "data-index": first };
  return el("details", span, summary, body);
}

function archived(ids, from) {
  return ids.length ? [" · archived as ", ids.map((id) => artifactLink(id, from))] : "";
}

/** What identifies an item on both sides: its tool call or result ids, else its text. */
function identity(item) {
  const named = item.parts.filter((p) => p.kind === "call" || p.kind === "result");
  const ids = named.map((p) => p.label);
  if (ids.length || item.label) return `${item.role}|${item.label}|${ids.join("|")}`;
  return `${item.role}|${item.parts.map((p) => p.text).join("\n")}`;
}

function preparedNode(index, item, from) {
  if (!isProxyText(item)) return messageNode(index, item, [], from);
  const node = messageNode(index, item, [], from, "from-proxy");
  const badge = el("span", { class: "badge proxy" }, "written by the proxy");
  node.querySelector("header .size").before(badge);
  return node;
}

/** Rows of [original, prepared] side by side: an item kept, shortened or replaced faces its
 * prepared form; a run of dropped or summarized messages is folded behind one line (what
 * removed it, where it is archived; open it for the messages) facing the proxy's notice; what
 * only one side has faces an empty cell. */
export function pairedRows(original, prepared, actions, from) {
  const marks = marksByIndex(actions);
  const rows = [];
  const prefixes = Math.max(original.prefix.length, prepared.prefix.length);
  for (let k = 0; k < prefixes; k += 1) {
    rows.push([original.prefix[k] && messageNode(null, original.prefix[k], [], from),
      prepared.prefix[k] && preparedNode(null, prepared.prefix[k], from)]);
  }
  const a = original.items;
  const b = prepared.items;
  const left = a.map(identity);
  const right = b.map(identity);
  const ahead = new Map(); // identities of the original items not yet paired
  for (const id of left) ahead.set(id, (ahead.get(id) || 0) + 1);
  const take = (i) => ahead.set(left[i], ahead.get(left[i]) - 1);
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const own = i < a.length ? marks.get(i) || [] : [];
    const span = own.find((m) => SPANS.has(m.step));
    if (span) {
      let last = i;
      while (last + 1 < a.length && (marks.get(last + 1) || []).includes(span)) last += 1;
      const notice = j < b.length && isProxyText(b[j]);
      const stand = notice ? preparedNode(j, b[j], from) : null;
      rows.push([spanNode(span, i, last, a, marks, from), stand]);
      for (let k = i; k <= last; k += 1) take(k);
      i = last + 1;
      j += notice ? 1 : 0;
    } else if (i < a.length && j < b.length
      && (left[i] === right[j] || (own.length && isProxyText(b[j])))) {
      rows.push([messageNode(i, a[i], own, from), preparedNode(j, b[j], from)]);
      take(i);
      i += 1;
      j += 1;
    } else if (j < b.length && (i >= a.length || !ahead.get(right[j]))) {
      rows.push([null, preparedNode(j, b[j], from)]);
      j += 1;
    } else {
      rows.push([messageNode(i, a[i], own, from), null]);
      take(i);
      i += 1;
    }
  }
  return rows;
}

/** Without bodies: the manifest's actions by message index. */
export function actionsByIndex(actions, from) {
  const marks = marksByIndex(actions);
  const indices = [...marks.keys()].sort((a, b) => a - b);
  if (!indices.length) return el("p", { class: "muted" }, "No action applied to a message.");
  const rows = [];
  for (let i = 0; i < indices.length; ) {
    let j = i;
    const same = (a, b) => marks.get(a).length === marks.get(b).length
      && marks.get(a).every((m, n) => m === marks.get(b)[n]);
    const next = (k) => k + 1 < indices.length && indices[k + 1] === indices[k] + 1
      && same(indices[i], indices[k + 1]);
    while (next(j)) j += 1;
    rows.push(el("tr", null,
      el("td", { class: "num" }, ranges(indices.slice(i, j + 1))),
      el("td", null, marks.get(indices[i]).map((m) => markNode(m, from)))));
    i = j + 1;
  }
  return el("table", { class: "grid by-index" },
    el("thead", null, el("tr", null, el("th", null, "messages"), el("th", null, "actions"))),
    el("tbody", null, rows));
}
