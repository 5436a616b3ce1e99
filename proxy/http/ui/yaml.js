// A JSON value as YAML-like text, the way policy files are written: nested keys indented, short
// lists of plain values on one line, lists of objects as `- key: value` items.

const PLAIN = /^[A-Za-z0-9_./][A-Za-z0-9_./*@+ -]*$/; // else quoted (`*`, `-` lead YAML syntax)

function scalar(value) {
  if (typeof value !== "string") return value === undefined ? "null" : JSON.stringify(value);
  return PLAIN.test(value) && value.trim() === value ? value : JSON.stringify(value);
}

function inline(list) {
  return list.every((v) => v === null || typeof v !== "object");
}

function lines(value, indent, out) {
  const pad = " ".repeat(indent);
  if (Array.isArray(value)) {
    for (const item of value) {
      if (item !== null && typeof item === "object" && !Array.isArray(item)) {
        const nested = [];
        lines(item, indent + 2, nested);
        if (nested.length) nested[0] = `${pad}- ${nested[0].slice(indent + 2)}`;
        out.push(...(nested.length ? nested : [`${pad}- {}`]));
      } else {
        out.push(`${pad}- ${Array.isArray(item) ? JSON.stringify(item) : scalar(item)}`);
      }
    }
    return out;
  }
  for (const [key, item] of Object.entries(value)) {
    if (Array.isArray(item) && inline(item)) {
      out.push(`${pad}${key}: [${item.map(scalar).join(", ")}]`);
    } else if (item !== null && typeof item === "object") {
      const empty = Array.isArray(item) ? "[]" : "{}";
      if (!Object.keys(item).length) out.push(`${pad}${key}: ${empty}`);
      else {
        out.push(`${pad}${key}:`);
        lines(item, indent + 2, out);
      }
    } else {
      out.push(`${pad}${key}: ${scalar(item)}`);
    }
  }
  return out;
}

export function yaml(value) {
  if (value === null || typeof value !== "object") return scalar(value);
  return lines(value, 0, []).join("\n");
}
