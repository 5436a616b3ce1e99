// A small time chart as inline SVG: each line a series of one field of the points, an area under
// the ones marked so; axes with a few labels. Built from elements only (no markup).

import { svg } from "./dom.js";
import { compact, shortTime } from "./format.js";

const WIDTH = 560;
const HEIGHT = 150;
const PAD = { left: 44, right: 8, top: 10, bottom: 20 };
const MAX_POINTS = 120;

/** Points summed into at most `MAX_POINTS` buckets of equal time. */
export function bucketed(points, fields) {
  if (points.length <= MAX_POINTS) return points;
  const start = points[0].time;
  const step = (points[points.length - 1].time - start) / MAX_POINTS || 1;
  const buckets = new Map();
  for (const point of points) {
    const slot = Math.min(Math.floor((point.time - start) / step), MAX_POINTS - 1);
    const bucket = buckets.get(slot) || { time: start + slot * step };
    for (const field of fields) {
      if (typeof point[field] === "number") bucket[field] = (bucket[field] || 0) + point[field];
    }
    buckets.set(slot, bucket);
  }
  return [...buckets.values()];
}

export function timeChart(points, lines, title) {
  const chart = svg("svg", {
    class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": title,
  });
  chart.append(svg("title", null, title));
  // a point with nothing on any line is a request never prepared nor sent (a refusal): left out
  const counted = points.filter((p) => lines.some((l) => p[l.field]));
  if (!counted.length) {
    chart.append(svg("text", { x: WIDTH / 2, y: HEIGHT / 2, class: "empty" }, "no data yet"));
    return chart;
  }
  const data = bucketed([...counted].sort((a, b) => a.time - b.time), lines.map((l) => l.field));
  const t0 = data[0].time;
  const t1 = data[data.length - 1].time;
  const top = Math.max(1, ...data.flatMap((p) => lines.map((l) => p[l.field] || 0)));
  const known = (field) => data.filter((p) => typeof p[field] === "number");
  const share = (t) => (t1 === t0 ? 0.5 : (t - t0) / (t1 - t0));
  const x = (t) => PAD.left + share(t) * (WIDTH - PAD.left - PAD.right);
  const y = (v) => HEIGHT - PAD.bottom - (v / top) * (HEIGHT - PAD.top - PAD.bottom);
  axes(chart, top, t0, t1, y);
  for (const line of lines) {
    const points = known(line.field);
    if (!points.length) continue;
    const coords = points.map((p) => `${x(p.time).toFixed(1)},${y(p[line.field]).toFixed(1)}`);
    if (line.area) {
      const first = x(points[0].time).toFixed(1);
      const last = x(points[points.length - 1].time).toFixed(1);
      const base = `${last},${y(0)} ${first},${y(0)}`;
      const outline = `${coords.join(" ")} ${base}`;
      chart.append(svg("polygon", { class: `area ${line.kind}`, points: outline }));
    }
    chart.append(svg("polyline", { class: `line ${line.kind}`, points: coords.join(" ") }));
    if (points.length === 1) {
      const [only] = points;
      const dot = { class: `dot ${line.kind}`, cx: x(only.time), cy: y(only[line.field]), r: 3 };
      chart.append(svg("circle", dot));
    }
  }
  return chart;
}

function axes(chart, top, t0, t1, y) {
  for (const share of [0, 0.5, 1]) {
    const value = top * share;
    chart.append(
      svg("line",
        { class: "grid", x1: PAD.left, x2: WIDTH - PAD.right, y1: y(value), y2: y(value) }),
      svg("text", { class: "tick", x: PAD.left - 4, y: y(value) + 3, "text-anchor": "end" },
        compact(value)),
    );
  }
  const bottom = HEIGHT - 6;
  chart.append(svg("text", { class: "tick", x: PAD.left, y: bottom }, shortTime(t0, t1 - t0)));
  if (t1 !== t0) {
    const end = shortTime(t1, t1 - t0);
    const place = { class: "tick", x: WIDTH - PAD.right, y: bottom, "text-anchor": "end" };
    chart.append(svg("text", place, end));
  }
}

export function legend(lines) {
  return lines.map((l) => [svg("svg", { class: "key", viewBox: "0 0 10 10", width: 10, height: 10 },
    svg("rect", { class: `swatch ${l.kind}`, width: 10, height: 10 })), ` ${l.label}  `]);
}
