/**
 * Which evaluation methods the builder offers, and why the others are off.
 *
 * Two sources, merged: the PQL package's local `check`/`classify` (instant,
 * on every keystroke) and the server's eligibility endpoint (debounced; it
 * alone knows whether the chosen merge policy is active on edge and what
 * referenced audiences are). While the server's answer for the current text
 * is pending, the local verdict is shown; once it arrives it wins, because it
 * is what a save will be judged by.
 */
import { check, classify, type Diagnostic } from "@segmentd/pql";
import type { EligibilityAnswer, MergePolicy, Method } from "./api/types.js";

export interface MethodChoice {
  method: Method;
  enabled: boolean;
  reasons: string[];
}

export interface LocalVerdict {
  diagnostics: Diagnostic[];
  /** Null when the text has errors (nothing can be classified). */
  queryType: string | null;
  reasons: string[];
  synchronous: boolean;
  continuous: boolean;
}

export function localVerdict(text: string): LocalVerdict {
  if (text.trim() === "") {
    return { diagnostics: [], queryType: null, reasons: ["the expression is empty"], synchronous: false, continuous: false };
  }
  const diagnostics = check(text);
  if (diagnostics.some((d) => d.severity === "error")) {
    return { diagnostics, queryType: null, reasons: ["the expression has errors"], synchronous: false, continuous: false };
  }
  try {
    const c = classify(text);
    return { diagnostics, queryType: c.queryType, reasons: c.reasons, synchronous: c.synchronous, continuous: c.continuous };
  } catch (err) {
    // check() and classify() share the parser, so this is unexpected; say so rather than guess.
    return { diagnostics, queryType: null, reasons: [`the expression could not be classified: ${(err as Error).message}`], synchronous: false, continuous: false };
  }
}

function policyReason(policy: MergePolicy | undefined): string[] {
  if (!policy || policy.isActiveOnEdge) return [];
  return [`merge policy "${policy.name}" is not active on edge; Edge needs the sandbox's active-on-edge merge policy`];
}

/** The three choices from the local verdict alone (plus what the merge-policy list says about edge). */
export function choicesFromLocal(v: LocalVerdict, policy: MergePolicy | undefined): MethodChoice[] {
  const edgeReasons = v.synchronous ? [] : [...v.reasons];
  edgeReasons.push(...policyReason(policy));
  return [
    // Every valid expression is batch-eligible; invalid text cannot be saved at all (the diagnostics say why).
    { method: "batch", enabled: true, reasons: [] },
    { method: "continuous", enabled: v.continuous, reasons: v.continuous ? [] : [...v.reasons] },
    { method: "synchronous", enabled: edgeReasons.length === 0, reasons: edgeReasons },
  ];
}

/** The three choices from the server's answer. */
export function choicesFromServer(a: EligibilityAnswer): MethodChoice[] {
  const invalid = a.valid ? [] : ["the expression has errors"];
  return [
    { method: "batch", enabled: true, reasons: [] },
    { method: "continuous", enabled: a.valid && a.eligible.continuous, reasons: a.valid ? dedupe(a.reasons.continuous) : invalid },
    { method: "synchronous", enabled: a.valid && a.eligible.synchronous, reasons: a.valid ? dedupe(a.reasons.synchronous) : invalid },
  ];
}

function dedupe(list: string[]): string[] {
  return [...new Set(list)];
}

/** The method to keep selected after the choices changed: the current one if still allowed, else Batch. */
export function keepSelection(current: Method, choices: MethodChoice[]): Method {
  return choices.find((c) => c.method === current)?.enabled ? current : "batch";
}
