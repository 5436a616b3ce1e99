// The small labels the list and the request view share: actions and outcomes.

import { el } from "./dom.js";

export const ACTION_LABELS = {
  offload_tool_results: "offloaded",
  clear_tool_results: "cleared",
  drop_turns: "dropped",
  summarize: "summarized",
  condense_tool_results: "condensed",
  defer_tools: "tools deferred",
  offload_messages: "offloaded message",
};

function token(value) {
  return String(value).replace(/[^a-z0-9_-]/gi, "");
}

export function actionBadge(step, count) {
  const label = ACTION_LABELS[step] || step;
  return el(
    "span",
    { class: `badge act act-${token(step)}`, title: step },
    count === undefined || count === null ? label : `${label} ${count}`,
  );
}

export function outcomeBadge(outcome, status) {
  const text = status && status !== 200 ? `${status} ${outcome}` : outcome;
  return el("span", { class: `badge outcome outcome-${token(outcome)}` }, text || "–");
}
