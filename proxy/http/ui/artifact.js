// One artifact, a page at a time: the endpoint the curl examples use.

import { getJson } from "./api.js";
import { el, field, filterForm, replace, route } from "./dom.js";
import { failed } from "./failure.js";
import { int } from "./format.js";

const PAGE_SIZES = [2000, 5000, 10000, 20000];
const DEFAULT_PAGE = 5000;

function number(query, name, fallback) {
  const value = Number.parseInt(query.get(name) || "", 10);
  return Number.isFinite(value) && value >= 0 ? value : fallback;
}

export function artifactView(root, id, query) {
  const offset = number(query, "offset", 0);
  const size = number(query, "max_chars", DEFAULT_PAGE) || DEFAULT_PAGE;
  const from = query.get("from") || "";
  const session = query.get("session") || "";
  const at = (start, chars) =>
    route(["artifacts", id], { offset: start, max_chars: chars, from, session });
  const place = (next) => at(next, size);
  const back = from
    ? el("a", { href: route(["requests", from]) }, "← request")
    : el("a", { href: route(["requests"]) }, "← requests");
  const body = el("div", { class: "artifact-page" }, el("p", { class: "muted" }, "Loading…"));
  const name = el("span", { class: "mono" }, id);
  const crumbs = el("div", { class: "crumbs" }, back, " / artifact ", name);
  root.append(crumbs, body);
  let stopped = false;
  getJson(`/v1/context/artifacts/${encodeURIComponent(id)}`, { offset, max_chars: size, session })
    .then((page) => {
      if (!stopped) replace(body, ...pageNodes(page, size, place, (n) => at(offset, n)));
    })
    .catch((error) => {
      if (stopped) return;
      failed(body, error, true); // an operator key reads records, not a tenant's artifacts
      body.append(hint(error, id, from, size));
    });
  return () => {
    stopped = true;
  };
}

/** Why an artifact may not be readable with this key, and a way to name its session. */
function hint(error, id, from, size) {
  if (error.status === 401) {
    const why = "An artifact belongs to its tenant: read it with that tenant's key.";
    return el("p", { class: "muted" }, why);
  }
  const children = [
    el("span", { class: "muted" }, "Stored within a session? Name it: "),
    field("session", "", 20),
    el("button", { type: "submit" }, "Read"),
  ];
  return filterForm("filters", children, ({ session }) => {
    window.location.hash = route(["artifacts", id], { offset: 0, max_chars: size, from, session });
  });
}

function pageNodes(page, size, place, sized) {
  const end = page.offset + page.content.length;
  const previous = Math.max(page.offset - size, 0);
  const last = Math.max(page.total_chars - size, 0);
  const share = page.total_chars ? Math.min(end / page.total_chars, 1) : 1;
  const link = (text, target, enabled, id) => (enabled
    ? el("a", { class: "button", href: place(target), id }, text)
    : el("span", { class: "button disabled", id }, text));
  const sizes = el("select", { "aria-label": "page size" },
    PAGE_SIZES.map((n) => el("option", { value: n, selected: n === size }, `${int(n)} chars`)));
  sizes.addEventListener("change", () => {
    window.location.hash = sized(Number(sizes.value));
  });
  const nav = el("div", { class: "toolbar" },
    link("⇤ first", 0, page.offset > 0, "first-page"),
    link("← previous", previous, page.offset > 0, "previous-page"),
    link("next →", page.next_offset, page.next_offset !== null, "next-page"),
    link("last ⇥", last, page.next_offset !== null, "last-page"),
    el("span", { class: "position", id: "artifact-position" },
      `chars ${int(page.offset)}–${int(end)} of ${int(page.total_chars)}`),
    el("span", { class: "progress" }, el("span", { class: "bar" })),
    el("span", { class: "spacer" }),
    sizes);
  nav.querySelector(".bar").style.width = `${(share * 100).toFixed(1)}%`;
  return [
    nav,
    page.content_parts
      ? el("p", { class: "muted" }, "Sent as content parts; shown as stored text.")
      : null,
    el("pre", { class: "content artifact-content", id: "artifact-content" }, page.content),
  ];
}
