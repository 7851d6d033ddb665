/**
 * Each top-level rule's own count on its card: the estimated number of
 * profiles the rule alone matches, with its interval for screen readers and
 * as a tooltip. Painted into the `[data-count-for]` slots the canvas draws.
 */
import { formatCount, profilesText } from "../../format.js";
import type { RuleCount } from "./estimate.js";

const WHY: Record<"pending" | "empty" | "limit" | "invalid", [string, string]> = {
  pending: ["…", "Counting the profiles this rule matches"],
  empty: ["—", "This group has no rules yet"],
  limit: ["not counted", "Only the first 19 top-level rules are counted"],
  invalid: ["—", "This rule is not complete yet"],
};

export function countText(c: RuleCount | undefined): { text: string; label: string } {
  if (!c) return { text: "", label: "" };
  if ("state" in c) return { text: WHY[c.state][0], label: WHY[c.state][1] };
  const e = c.estimate;
  const low = formatCount(e.estimatedSizeRange.low);
  const high = formatCount(e.estimatedSizeRange.high);
  return {
    text: `≈ ${formatCount(e.estimatedSize)}`,
    label: `${profilesText(e.estimatedSize, "About ")} ${e.estimatedSize === 1 ? "matches" : "match"} this rule alone (95% interval ${low} to ${high})`,
  };
}

export function paintCounts(root: HTMLElement, counts: Map<string, RuleCount>): void {
  for (const el of Array.from(root.querySelectorAll<HTMLElement>("[data-count-for]"))) {
    const c = counts.get(el.dataset.countFor!);
    const { text, label } = countText(c);
    el.textContent = text;
    el.title = label;
    if (label === "") el.removeAttribute("aria-label");
    else el.setAttribute("aria-label", label);
    el.classList.toggle("is-stale", c !== undefined && "estimate" in c && c.stale);
    if (c && "estimate" in c) {
      el.dataset.size = String(c.estimate.estimatedSize);
      el.dataset.low = String(c.estimate.estimatedSizeRange.low);
      el.dataset.high = String(c.estimate.estimatedSizeRange.high);
    } else {
      delete el.dataset.size;
      delete el.dataset.low;
      delete el.dataset.high;
    }
  }
}
