/** Who a hygiene call acts for: the organization, the sandbox its datasets live in, and the caller (for createdBy/updatedBy). */
export interface HygieneContext {
  orgId: string;
  sandboxName: string;
  actor: string;
}
