// PostgreSQL schema of the profile store: the same tables as the embedded store,
// with record bodies as jsonb so the batch engine's PQL→SQL path can read them.
export const PG_SCHEMA = `
CREATE TABLE IF NOT EXISTS tenants (tid serial PRIMARY KEY, org text NOT NULL, sandbox text NOT NULL, UNIQUE (org, sandbox));
CREATE TABLE IF NOT EXISTS datasets (
  tid int NOT NULL, id text NOT NULL, name text NOT NULL, description text, schema_class text NOT NULL,
  profile_enabled boolean NOT NULL, identity_fields jsonb NOT NULL, created int8 NOT NULL, updated int8 NOT NULL,
  PRIMARY KEY (tid, id));
CREATE TABLE IF NOT EXISTS profiles (pid bigserial PRIMARY KEY, tid int NOT NULL, size int NOT NULL, created int8 NOT NULL);
CREATE INDEX IF NOT EXISTS profiles_tid ON profiles (tid, pid);
CREATE TABLE IF NOT EXISTS identities (tid int NOT NULL, ns text NOT NULL, idv text NOT NULL, pid int8 NOT NULL, PRIMARY KEY (tid, ns, idv));
CREATE INDEX IF NOT EXISTS identities_pid ON identities (tid, pid);
CREATE TABLE IF NOT EXISTS fragments (tid int NOT NULL, ds text NOT NULL, ns text NOT NULL, idv text NOT NULL, pid int8 NOT NULL,
  ts int8 NOT NULL, ingested int8 NOT NULL, body jsonb NOT NULL, PRIMARY KEY (tid, ds, ns, idv));
CREATE INDEX IF NOT EXISTS fragments_pid ON fragments (tid, pid);
CREATE TABLE IF NOT EXISTS events (seq bigserial PRIMARY KEY, tid int NOT NULL, ds text NOT NULL, eid text NOT NULL, ns text NOT NULL,
  idv text NOT NULL, pid int8 NOT NULL, ts int8 NOT NULL, body jsonb NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS events_eid ON events (tid, ds, eid);
CREATE INDEX IF NOT EXISTS events_pid_ts ON events (tid, pid, ts);
CREATE TABLE IF NOT EXISTS lake_records (seq bigserial PRIMARY KEY, tid int NOT NULL, ds text NOT NULL, eid text, ns text NOT NULL,
  idv text NOT NULL, ts int8 NOT NULL, body jsonb NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS lake_eid ON lake_records (tid, ds, eid);
CREATE INDEX IF NOT EXISTS lake_identity ON lake_records (tid, ns, idv);
CREATE TABLE IF NOT EXISTS memberships (tid int NOT NULL, pid int8 NOT NULL, def text NOT NULL, status text NOT NULL, lqt text NOT NULL,
  PRIMARY KEY (tid, pid, def));
CREATE INDEX IF NOT EXISTS memberships_def ON memberships (tid, def, status, pid);
CREATE TABLE IF NOT EXISTS transitions (seq bigserial PRIMARY KEY, tid int NOT NULL, pid int8 NOT NULL, def text NOT NULL,
  from_status text, to_status text NOT NULL, source text NOT NULL, at int8 NOT NULL);
CREATE INDEX IF NOT EXISTS transitions_def_at ON transitions (tid, def, at);
-- A profile's transitions in named definitions (explain, members, a profile's memberships with
-- history) without the definitions' whole logs. Definition first: a job writes a definition's
-- transitions in profile order, so its inserts sweep one key range instead of the whole index.
-- An older schema gains it when opened, built once over its transitions.
CREATE INDEX IF NOT EXISTS transitions_def_pid ON transitions (tid, def, pid, at);
-- How far each partition of the streaming workers' stream was applied (written with what it covers).
CREATE TABLE IF NOT EXISTS partition_positions (part text PRIMARY KEY, seq int8 NOT NULL);
-- The parts of segment jobs written by the workers holding their partitions (#44): once each.
CREATE TABLE IF NOT EXISTS job_partitions (tid int NOT NULL, job text NOT NULL, part int4 NOT NULL, worker text NOT NULL,
  transitions int8 NOT NULL, report jsonb NOT NULL, PRIMARY KEY (tid, job, part));
-- The job's instant: rows of jobs older than a week are pruned (an older schema gains it in place).
ALTER TABLE job_partitions ADD COLUMN IF NOT EXISTS at int8 NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS transitions_at ON transitions (tid, at);
CREATE TABLE IF NOT EXISTS batches (tid int NOT NULL, id text NOT NULL, ds text NOT NULL, status text NOT NULL,
  created int8 NOT NULL, updated int8 NOT NULL, completed int8, records_read int8 NOT NULL DEFAULT 0,
  records_written int8 NOT NULL DEFAULT 0, records_failed int8 NOT NULL DEFAULT 0, files jsonb NOT NULL DEFAULT '[]',
  errors jsonb NOT NULL DEFAULT '[]', PRIMARY KEY (tid, id));
CREATE TABLE IF NOT EXISTS batch_records (seq bigserial PRIMARY KEY, tid int NOT NULL, batch text NOT NULL, meta text NOT NULL, body text NOT NULL);
CREATE INDEX IF NOT EXISTS batch_records_batch ON batch_records (tid, batch, seq);
-- Records skipped at read (quarantine.ts): one row per record; additive, older schemas gain it in place.
CREATE TABLE IF NOT EXISTS quarantine (seq bigserial PRIMARY KEY, tid int NOT NULL, ds text NOT NULL, kind text NOT NULL, rid text NOT NULL,
  ns text NOT NULL, idv text NOT NULL, pid int8, reason text NOT NULL, first_seen int8 NOT NULL, last_seen int8 NOT NULL, UNIQUE (tid, kind, ds, rid));
`;
