/**
 * Order of evaluation inside a job: a definition that references others with
 * `inSegment` is evaluated after them, so that it sees this job's results
 * (not the previous job's). Cycles cannot be ordered and are rejected when
 * the job is created.
 */

export interface DependencyNode {
  id: string;
  /** Ids referenced through inSegment (may include ids outside the job). */
  references: readonly string[];
}

export class DependencyCycleError extends Error {
  constructor(readonly cycle: string[]) {
    super(`inSegment references form a cycle: ${cycle.join(" -> ")}`);
  }
}

/**
 * Topological order (dependencies first; ties keep the input order, so a job's
 * order is deterministic). References to ids outside `nodes` are ignored here:
 * they are read from the stored memberships.
 */
export function dependencyOrder<T extends DependencyNode>(nodes: readonly T[]): T[] {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const state = new Map<string, "visiting" | "done">();
  const out: T[] = [];
  const visit = (n: T, path: string[]): void => {
    const s = state.get(n.id);
    if (s === "done") return;
    if (s === "visiting") throw new DependencyCycleError([...path.slice(path.indexOf(n.id)), n.id]);
    state.set(n.id, "visiting");
    for (const r of n.references) {
      const dep = byId.get(r);
      if (dep !== undefined) visit(dep, [...path, n.id]);
    }
    state.set(n.id, "done");
    out.push(n);
  };
  for (const n of nodes) visit(n, []);
  return out;
}
