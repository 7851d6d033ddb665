/**
 * The "new audience updated" chart: one bar per metrics bucket (hour for 24
 * hours, day for 7/30 days), qualifications up and disqualifications down
 * from a zero line, as inline SVG (no chart library, nothing fetched). Also
 * rendered as a table for screen readers — the figures must be readable
 * without seeing the bars.
 */
import type { AudienceMetrics } from "./api/types.js";
import { h, svg } from "./dom.js";
import { formatBucketLabel, formatCount } from "./format.js";

export interface BarGeometry {
  x: number;
  width: number;
  upHeight: number;
  downHeight: number;
}

/** Bar positions in a width×height box whose zero line is at `zeroY`; pure, for tests. */
export function barGeometry(m: Pick<AudienceMetrics, "buckets">, width: number, height: number): { bars: BarGeometry[]; zeroY: number } {
  const n = Math.max(1, m.buckets.length);
  const maxUp = Math.max(0, ...m.buckets.map((b) => b.qualified));
  const maxDown = Math.max(0, ...m.buckets.map((b) => b.disqualified));
  const total = maxUp + maxDown;
  // With no movement at all, the zero line sits at the bottom and no bar has height.
  const zeroY = total === 0 ? height : (height * maxUp) / total;
  const scale = total === 0 ? 0 : height / total;
  const slot = width / n;
  const gap = Math.min(4, slot * 0.2);
  return {
    zeroY,
    bars: m.buckets.map((b, i) => ({ x: i * slot + gap / 2, width: Math.max(1, slot - gap), upHeight: b.qualified * scale, downHeight: b.disqualified * scale })),
  };
}

/**
 * The y axis's labels: the largest qualified count at the top, 0 at the zero
 * line, the largest disqualified count at the bottom, each with its position
 * as a fraction of the chart's height. Pure, for tests.
 */
export function yAxisTicks(m: Pick<AudienceMetrics, "buckets">): Array<{ label: string; at: number }> {
  const maxUp = Math.max(0, ...m.buckets.map((b) => b.qualified));
  const maxDown = Math.max(0, ...m.buckets.map((b) => b.disqualified));
  const total = maxUp + maxDown;
  if (total === 0) return [{ label: "0", at: 1 }];
  const ticks: Array<{ label: string; at: number }> = [];
  if (maxUp > 0) ticks.push({ label: `+${formatCount(maxUp)}`, at: 0 });
  ticks.push({ label: "0", at: maxUp / total });
  if (maxDown > 0) ticks.push({ label: `−${formatCount(maxDown)}`, at: 1 });
  return ticks;
}

export function renderChart(m: AudienceMetrics): HTMLElement {
  const W = 720;
  const H = 180;
  const { bars, zeroY } = barGeometry(m, W, H);
  const title = `New audience updated per ${m.bucketSizeMs < 86_400_000 ? "hour" : "day"}`;
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": `${title}: ${formatCount(m.qualified)} qualified, ${formatCount(m.disqualified)} disqualified` });
  chart.append(svg("line", { x1: 0, x2: W, y1: zeroY, y2: zeroY, class: "chart-zero" }));
  bars.forEach((b, i) => {
    const bucket = m.buckets[i]!;
    const label = `${formatBucketLabel(bucket.start, m.bucketSizeMs)}: +${bucket.qualified} / −${bucket.disqualified}`;
    if (b.upHeight > 0) chart.append(svg("rect", { x: b.x, y: zeroY - b.upHeight, width: b.width, height: b.upHeight, class: "bar-up" }, svg("title", {}, label)));
    if (b.downHeight > 0) chart.append(svg("rect", { x: b.x, y: zeroY, width: b.width, height: b.downHeight, class: "bar-down" }, svg("title", {}, label)));
  });
  // First, middle and last bucket labels are enough to read the time axis. They
  // are HTML, not SVG text, so they stay legible when the chart shrinks on a phone.
  const ticks = [...new Set([0, Math.floor((m.buckets.length - 1) / 2), m.buckets.length - 1])].filter((i) => i >= 0 && i < m.buckets.length);
  const axis = h("div", { class: "chart-axis", "aria-hidden": "true" }, ...ticks.map((i) => h("span", {}, formatBucketLabel(m.buckets[i]!.start, m.bucketSizeMs))));
  // Profiles per bar, in HTML beside the plot; positioned through the CSSOM (the CSP forbids style attributes).
  const yAxis = h("div", { class: "chart-yaxis", "aria-hidden": "true", "data-testid": "chart-yaxis" }, ...yAxisTicks(m).map((t) => {
    const label = h("span", { class: "chart-ytick" }, t.label);
    label.style.top = `${(t.at * 100).toFixed(2)}%`;
    return label;
  }));
  const table = h("table", { class: "visually-hidden" },
    h("caption", {}, title),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "From"), h("th", { scope: "col" }, "Qualified"), h("th", { scope: "col" }, "Disqualified"))),
    h("tbody", {}, ...m.buckets.map((b) => h("tr", {}, h("td", {}, formatBucketLabel(b.start, m.bucketSizeMs)), h("td", {}, b.qualified), h("td", {}, b.disqualified)))));
  return h("figure", { class: "chart-figure" }, h("div", { class: "chart-plot" }, yAxis, chart), axis, table,
    h("figcaption", { class: "chart-legend" }, h("span", { class: "legend-up" }, "Qualified"), h("span", { class: "legend-down" }, "Disqualified")));
}
