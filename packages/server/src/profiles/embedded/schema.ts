// SQLite schema of the embedded profile store. Tenants are mapped to a small
// integer (tid) so that every index row carries 8 bytes instead of two strings.
// Profile ids (pid) come from one AUTOINCREMENT sequence so an id is never reused
// after its graph is deleted (memberships are keyed by it).
// batch_records holds the valid records of a loading ingestion batch (staged, not
// in profiles) until the batch completes or is aborted; added in place with
// CREATE ... IF NOT EXISTS, so older data directories open unchanged. So is quarantine.
export const SQLITE_SCHEMA = `
CREATE TABLE IF NOT EXISTS tenants (tid INTEGER PRIMARY KEY, org TEXT NOT NULL, sandbox TEXT NOT NULL, UNIQUE (org, sandbox));
CREATE TABLE IF NOT EXISTS datasets (
  tid INTEGER NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, description TEXT, schema_class TEXT NOT NULL,
  profile_enabled INTEGER NOT NULL, identity_fields TEXT NOT NULL, created INTEGER NOT NULL, updated INTEGER NOT NULL,
  PRIMARY KEY (tid, id));
CREATE TABLE IF NOT EXISTS profiles (pid INTEGER PRIMARY KEY AUTOINCREMENT, tid INTEGER NOT NULL, size INTEGER NOT NULL, created INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS profiles_tid ON profiles (tid, pid);
CREATE TABLE IF NOT EXISTS identities (tid INTEGER NOT NULL, ns TEXT NOT NULL, idv TEXT NOT NULL, pid INTEGER NOT NULL,
  PRIMARY KEY (tid, ns, idv)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS identities_pid ON identities (tid, pid);
CREATE TABLE IF NOT EXISTS fragments (tid INTEGER NOT NULL, ds TEXT NOT NULL, ns TEXT NOT NULL, idv TEXT NOT NULL, pid INTEGER NOT NULL,
  ts INTEGER NOT NULL, ingested INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (tid, ds, ns, idv));
CREATE INDEX IF NOT EXISTS fragments_pid ON fragments (tid, pid);
CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, tid INTEGER NOT NULL, ds TEXT NOT NULL, eid TEXT NOT NULL, ns TEXT NOT NULL,
  idv TEXT NOT NULL, pid INTEGER NOT NULL, ts INTEGER NOT NULL, body TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS events_eid ON events (tid, ds, eid);
-- The events' (tid, pid, ts) index: two generations of it, event-index.ts (EVENT_INDEX_SCHEMA,
-- applied by migrateEventIndex, which converts an older file's events_pid_ts).
CREATE TABLE IF NOT EXISTS lake_records (seq INTEGER PRIMARY KEY, tid INTEGER NOT NULL, ds TEXT NOT NULL, eid TEXT, ns TEXT NOT NULL,
  idv TEXT NOT NULL, ts INTEGER NOT NULL, body TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS lake_eid ON lake_records (tid, ds, eid);
CREATE INDEX IF NOT EXISTS lake_identity ON lake_records (tid, ns, idv);
-- memberships, transitions and definition_codes: membership-codes.ts (MEMBERSHIP_SCHEMA), created
-- after migrateTextMemberships has converted an older file's text tables.
-- Two transitions indexes, both definition first: (definition, time) for the engines' queries and
-- audience metrics, (definition, profile, time) for a few profiles' transitions (explain, members,
-- a profile's memberships with history). A job writes a definition's transitions in profile order,
-- so each index's inserts sweep one key range: the second costs ~0.2–0.3 µs per transition in bulk
-- writes (bench:memberships; a profile-first one cost ~1.6 µs). A query naming no definition
-- scans the table. An older file gains the second when opened (MEMBERSHIP_SCHEMA builds it once).
DROP INDEX IF EXISTS transitions_at;
CREATE TABLE IF NOT EXISTS batches (tid INTEGER NOT NULL, id TEXT NOT NULL, ds TEXT NOT NULL, status TEXT NOT NULL,
  created INTEGER NOT NULL, updated INTEGER NOT NULL, completed INTEGER, records_read INTEGER NOT NULL DEFAULT 0,
  records_written INTEGER NOT NULL DEFAULT 0, records_failed INTEGER NOT NULL DEFAULT 0, files TEXT NOT NULL DEFAULT '[]',
  errors TEXT NOT NULL DEFAULT '[]', PRIMARY KEY (tid, id));
CREATE TABLE IF NOT EXISTS batch_records (seq INTEGER PRIMARY KEY, tid INTEGER NOT NULL, batch TEXT NOT NULL, meta TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS batch_records_batch ON batch_records (tid, batch, seq);
-- Records skipped at read (quarantine.ts): one row per record; added in place, older files open unchanged.
CREATE TABLE IF NOT EXISTS quarantine (seq INTEGER PRIMARY KEY, tid INTEGER NOT NULL, ds TEXT NOT NULL, kind TEXT NOT NULL, rid TEXT NOT NULL,
  ns TEXT NOT NULL, idv TEXT NOT NULL, pid INTEGER, reason TEXT NOT NULL, first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS quarantine_record ON quarantine (tid, kind, ds, rid);
`;
