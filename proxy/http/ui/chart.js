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
    for (const field of fields) bucket[field] = (bucket[field] || 0) + (point[field] || 0);
    buckets.set(slot, bucket);
  }
  return [...buckets.values()];
}

export function timeChart(points, lines, title) {
  const chart = svg("svg", {
    class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": title,
  });
  chart.append(svg("title", null, title));
  if (!points.length) {
    chart.append(svg("text", { x: WIDTH / 2, y: HEIGHT / 2, class: "empty" }, "no data yet"));
    return chart;
  }
  const data = bucketed([...points].sort((a, b) => a.time - b.time), lines.map((l) => l.field));
  const t0 = data[0].time;
  const t1 = data[data.length - 1].time;
  const top = Math.max(1, ...data.flatMap((p) => lines.map((l) => p[l.field] || 0)));
  const x = (t) => PAD.left + (t1 === t0 ? 0.5 : (t - t0) / (t1 - t0)) * (WIDTH - PAD.left - PAD.right);
  const y = (v) => HEIGHT - PAD.bottom - (v / top) * (HEIGHT - PAD.top - PAD.bottom);
  axes(chart, top, t0, t1, y);
  for (const line of lines) {
    const coords = data.map((p) => `${x(p.time).toFixed(1)},${y(p[line.field] || 0).toFixed(1)}`);
    if (line.area) {
      const base = `${x(t1).toFixed(1)},${y(0)} ${x(t0).toFixed(1)},${y(0)}`;
      chart.append(svg("polygon", { class: `area ${line.kind}`, points: `${coords.join(" ")} ${base}` }));
    }
    chart.append(svg("polyline", { class: `line ${line.kind}`, points: coords.join(" ") }));
    if (data.length === 1) chart.append(svg("circle", { class: `dot ${line.kind}`, cx: x(t0), cy: y(data[0][line.field] || 0), r: 3 }));
  }
  return chart;
}

function axes(chart, top, t0, t1, y) {
  for (const share of [0, 0.5, 1]) {
    const value = top * share;
    chart.append(
      svg("line", { class: "grid", x1: PAD.left, x2: WIDTH - PAD.right, y1: y(value), y2: y(value) }),
      svg("text", { class: "tick", x: PAD.left - 4, y: y(value) + 3, "text-anchor": "end" }, compact(value)),
    );
  }
  const bottom = HEIGHT - 6;
  chart.append(svg("text", { class: "tick", x: PAD.left, y: bottom }, shortTime(t0)));
  if (t1 !== t0) chart.append(svg("text", { class: "tick", x: WIDTH - PAD.right, y: bottom, "text-anchor": "end" }, shortTime(t1)));
}

export function legend(lines) {
  return lines.map((l) => [svg("svg", { class: "key", viewBox: "0 0 10 10", width: 10, height: 10 },
    svg("rect", { class: `swatch ${l.kind}`, width: 10, height: 10 })), ` ${l.label}  `]);
}
