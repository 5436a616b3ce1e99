// A request body of any of the three client formats as a list of items to show: each item's
// role and its parts (text, tool calls, tool results), in the body's own order.

const MAX_PART_CHARS = 100000;

function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 1);
}

function part(kind, label, value) {
  let text = value === undefined || value === null ? "" : json(value);
  let cut = 0;
  if (text.length > MAX_PART_CHARS) {
    cut = text.length - MAX_PART_CHARS;
    text = text.slice(0, MAX_PART_CHARS);
  }
  return { kind, label, text, cut };
}

/** Parts of a content value: a string, or a list of typed blocks (either family's). */
function contentParts(content) {
  if (content === undefined || content === null) return [];
  if (!Array.isArray(content)) return [part("text", "", content)];
  return content.flatMap(blockParts);
}

function blockParts(block) {
  if (typeof block === "string") return [part("text", "", block)];
  if (!block || typeof block !== "object") return [part("other", "", block)];
  switch (block.type) {
    case "text":
    case "input_text":
    case "output_text":
      return [part("text", "", block.text)];
    case "tool_use":
      return [part("call", `call ${block.name} · ${block.id}`, block.input)];
    case "tool_result":
      return [part("result", `result of ${block.tool_use_id}`, ""), ...contentParts(block.content)];
    case "thinking":
      return [part("aside", "thinking", block.thinking)];
    case "redacted_thinking":
      return [part("aside", "redacted thinking", "")];
    default:
      return [part("other", block.type || "block", block)];
  }
}

function chatItem(message) {
  const parts = contentParts(message.content);
  for (const call of message.tool_calls || []) {
    const fn = call.function || {};
    parts.push(part("call", `call ${fn.name} · ${call.id}`, fn.arguments));
  }
  if (message.function_call) {
    parts.push(part("call", `call ${message.function_call.name}`, message.function_call.arguments));
  }
  const label = message.tool_call_id ? `result of ${message.tool_call_id}` : message.name || "";
  return { role: message.role || "?", label, parts };
}

function responsesItem(item) {
  if (typeof item !== "object" || item === null) {
    return { role: "?", label: "", parts: [part("other", "", item)] };
  }
  switch (item.type) {
    case "function_call":
      return {
        role: "assistant",
        label: "",
        parts: [part("call", `call ${item.name} · ${item.call_id}`, item.arguments)],
      };
    case "function_call_output":
      return { role: "tool", label: `result of ${item.call_id}`, parts: contentParts(item.output) };
    case "reasoning":
      return {
        role: "assistant", label: "reasoning", parts: (item.summary || []).flatMap(blockParts),
      };
    case "message":
    case undefined:
      return { role: item.role || "?", label: "", parts: contentParts(item.content) };
    default:
      return { role: item.role || "item", label: item.type, parts: [part("other", "", item)] };
  }
}

/** `{prefix, items, tools}`: the system prefix the format keeps outside its list (Messages'
 * `system`, Responses' `instructions`), the listed items, and the tool names. */
export function conversationOf(format, body) {
  if (!body || typeof body !== "object") return { prefix: [], items: [], tools: [] };
  const name = (t) => (t.function && t.function.name) || t.name || t.type || "?";
  const tools = (body.tools || []).map(name);
  const system = (label, content) =>
    (content ? [{ role: "system", label, parts: contentParts(content) }] : []);
  if (format === "anthropic_messages") {
    return { prefix: system("", body.system), items: (body.messages || []).map(chatItem), tools };
  }
  if (format === "openai_responses") {
    const text = typeof body.input === "string";
    const input = text ? [{ role: "user", content: body.input }] : body.input;
    const items = (input || []).map(responsesItem);
    return { prefix: system("instructions", body.instructions), items, tools };
  }
  return { prefix: [], items: (body.messages || []).map(chatItem), tools };
}

/** Whether an item is one the proxy wrote (a notice, an offloaded or cleared stand-in). */
export function isProxyText(item) {
  return item.parts.some((p) => p.text.includes("[ctxproxy#"));
}
