/**
 * An explanation's trace as a tree a marketer can read: each node's PQL text
 * and value, item counts and the first events that held, `occurs` bounds.
 * Nodes with children are native <details> (keyboard and screen readers know
 * them); the branches leading to the deciding nodes start open, the others
 * closed, and the deciding nodes carry a visible "Decides" tag, not colour
 * alone.
 */
import type { TraceNode } from "../api/types.js";
import { h } from "../dom.js";
import { boundsText, eventText, itemsText, valueText } from "../explain-words.js";
import { formatCount } from "../format.js";
import { childPath, decidingNodes, type Deciding } from "../trace-deciding.js";

/** Held items listed per node; the rest are counted. */
const ITEMS_SHOWN = 5;

function valueBadge(v: unknown): HTMLElement {
  if (typeof v === "boolean") {
    return h("span", { class: `trace-value trace-${v ? "true" : "false"}` }, h("span", { "aria-hidden": "true" }, v ? "✓ " : "✗ "), String(v));
  }
  return h("span", { class: "trace-value trace-other" }, valueText(v));
}

function extras(node: TraceNode): HTMLElement | null {
  const parts: HTMLElement[] = [];
  if (node.items) {
    const shown = node.items.first.slice(0, ITEMS_SHOWN);
    const more = node.items.held - shown.length;
    parts.push(h("p", { class: "trace-items" }, itemsText(node.items)));
    if (shown.length > 0) {
      parts.push(h("ul", { class: "trace-held", "aria-label": "Items that held" },
        ...shown.map((x) => h("li", {}, eventText(x) ?? valueText(x))),
        more > 0 ? h("li", { class: "muted" }, `and ${formatCount(more)} more`) : null));
    }
  }
  if (node.bounds) parts.push(h("p", { class: "trace-bounds" }, `Time window tested: ${boundsText(node.bounds)}`));
  return parts.length === 0 ? null : h("div", { class: "trace-extra" }, ...parts);
}

function nodeView(node: TraceNode, at: string, d: Deciding): HTMLElement {
  const decides = d.deciding.has(at);
  // Spaces between the parts, so that they are read (and copied) as separate words.
  const head = [
    valueBadge(node.value), " ",
    h("code", { class: "trace-text" }, node.text),
    decides ? " " : null,
    decides ? h("span", { class: "decides-tag" }, "Decides") : null,
  ];
  const li = h("li", { class: `trace-node${decides ? " is-deciding" : ""}`, "data-path": at });
  const more = extras(node);
  if (node.children.length === 0) {
    li.append(h("div", { class: "trace-row" }, ...head), ...(more ? [more] : []));
    return li;
  }
  const details = h("details", { open: d.path.has(at) },
    h("summary", { class: "trace-row" }, ...head),
    more,
    h("ul", { class: "trace-children" }, ...node.children.map((c, i) => nodeView(c, childPath(at, i), d))));
  li.append(details);
  return li;
}

export function renderTrace(root: TraceNode): HTMLElement {
  const d = decidingNodes(root);
  return h("div", { class: "trace" },
    h("p", { class: "hint" }, "Each line is a part of the expression with its value for this profile. ",
      h("span", { class: "decides-tag" }, "Decides"), " marks the parts that settle the result; open a line to see what it read."),
    h("ul", { class: "trace-tree" }, ...root.children.map((c, i) => nodeView(c, childPath("", i), d))));
}
