// Numbers, times and sizes as an operator reads them.

const INTEGER = new Intl.NumberFormat("en-US");

export function int(value) {
  return typeof value === "number" ? INTEGER.format(Math.round(value)) : "–";
}

export function compact(value) {
  if (typeof value !== "number") return "–";
  const size = Math.abs(value);
  if (size >= 1e6) return `${(value / 1e6).toFixed(size >= 1e7 ? 0 : 1)}M`;
  if (size >= 1e3) return `${(value / 1e3).toFixed(size >= 1e4 ? 0 : 1)}k`;
  return String(Math.round(value));
}

export function usd(value) {
  if (typeof value !== "number") return "–";
  if (value !== 0 && Math.abs(value) < 0.01) return `$${value.toFixed(4)}`;
  return `$${value.toFixed(2)}`;
}

export function percent(value) {
  if (typeof value !== "number") return "–";
  const small = value > 0 && value < 0.1;
  return `${(value * 100).toFixed(small ? 1 : 0)}%`;
}

/** `1 message`, `3 turns`: a count and its unit (the manifest's units are plural). */
export function counted(count, unit) {
  const one = count === 1 && typeof unit === "string" && unit.endsWith("s");
  return `${int(count)} ${one ? unit.slice(0, -1) : unit || ""}`.trim();
}

export function ms(value) {
  if (typeof value !== "number") return "–";
  return value >= 10000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}

export function when(seconds) {
  if (typeof seconds !== "number") return "–";
  const date = new Date(seconds * 1000);
  const today = new Date().toDateString() === date.toDateString();
  const time = date.toLocaleTimeString("en-GB", { hour12: false });
  return today ? time : `${date.toISOString().slice(0, 10)} ${time}`;
}

/** A chart's time label: with seconds when the chart spans only minutes. */
export function shortTime(seconds, span = Infinity) {
  const date = new Date(seconds * 1000);
  const second = span < 600 ? { second: "2-digit" } : {};
  const parts = { hour: "2-digit", minute: "2-digit", ...second, hour12: false };
  return date.toLocaleTimeString("en-GB", parts);
}

/** Tokens saved as a share of the tokens before (null when nothing was counted). */
export function savedShare(before, after) {
  if (typeof before !== "number" || typeof after !== "number" || before <= 0) return null;
  return (before - after) / before;
}

/** `2-5, 9, 11-12`: sorted message indices as ranges. */
export function ranges(indices) {
  const sorted = [...new Set(indices)].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < sorted.length; i += 1) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j += 1;
    out.push(j > i ? `${sorted[i]}–${sorted[j]}` : String(sorted[i]));
    i = j;
  }
  return out.join(", ");
}
