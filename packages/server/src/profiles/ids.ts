// Identifier formats AEP clients recognise: Catalog dataset and batch ids are 24 hex digits.
import { randomBytes } from "node:crypto";

export function newCatalogId(): string {
  return randomBytes(12).toString("hex");
}
