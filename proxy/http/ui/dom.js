// Building the page from untrusted data: elements and text nodes only, never markup.

const SVG_NS = "http://www.w3.org/2000/svg";

export const ARTIFACT_ID = /art_[0-9a-f]{32}/g;

function attach(node, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.setAttribute("class", value);
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
}

function fill(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element; strings among `children` become text nodes. */
export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  attach(node, props);
  return fill(node, children);
}

/** `node`'s children replaced by `children` (nested lists flattened, null and false left out:
 * the DOM's own `replaceChildren` would write them as text). */
export function replace(node, ...children) {
  node.replaceChildren();
  return fill(node, children);
}

/** An SVG element (the charts). */
export function svg(tag, props, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  attach(node, props);
  return fill(node, children);
}

/** The fragment route of a view with its query (`#/artifacts/art_…?offset=0`). */
export function route(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") query.set(key, String(value));
  }
  const tail = query.toString();
  return `#/${path.map(encodeURIComponent).join("/")}${tail ? `?${tail}` : ""}`;
}

export function artifactLink(id, from) {
  return el("a", { class: "artifact", href: route(["artifacts", id], { from }) }, id);
}

/** `text` as text nodes, with every artifact id in it a link to the artifact viewer. */
export function linkified(text, from) {
  const out = [];
  let last = 0;
  for (const match of String(text).matchAll(ARTIFACT_ID)) {
    if (match.index > last) out.push(text.slice(last, match.index));
    out.push(artifactLink(match[0], from));
    last = match.index + match[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** A `<dl>` of label/value pairs, skipping pairs whose value is null or "". */
export function facts(pairs, className = "facts") {
  const list = el("dl", { class: className });
  for (const [label, value] of pairs) {
    if (value === null || value === undefined || value === "") continue;
    list.append(el("dt", null, label), el("dd", null, value));
  }
  return list;
}

/** A table; a header given as [text, class] (e.g. "num": right-aligned) sets its column's. */
export function table(headers, rows, className = "grid") {
  const th = (h) => (Array.isArray(h) ? el("th", { class: h[1] }, h[0]) : el("th", null, h));
  return el(
    "table",
    { class: className },
    el("thead", null, el("tr", null, headers.map(th))),
    el("tbody", null, rows),
  );
}

/** A text input of a filter form, named and labelled `name`. */
export function field(name, value, size, placeholder = name) {
  return el("input", { name, value, placeholder, "aria-label": name, size });
}

/** A form whose submission (never sent: the CSP forbids it) calls `apply` with its fields. */
export function filterForm(className, children, apply) {
  const form = el("form", { class: className }, children);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    apply(Object.fromEntries(new FormData(form).entries()));
  });
  return form;
}

export function message(text, kind = "muted") {
  return el("p", { class: kind }, text);
}
