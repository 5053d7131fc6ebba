// Where the job queue's two engines differ, and nowhere else: the store (./queue-store.ts) is written once, with SQL
// that both SQLite and PostgreSQL accept, `@name` placeholders, and these dialect pieces for the rest:
//   placeholders  SQLite binds `@name` itself; PostgreSQL gets `$1, $2, …` (toPositional)
//   times         SQLite INTEGER ms since the epoch; PostgreSQL timestamptz (Date)
//   JSON          bound as text on both; read back as text (SQLite) or already parsed (jsonb)
//   row locks     PostgreSQL locks the rows it reads in a transaction (FOR UPDATE, SKIP LOCKED for claims) and the
//                 per-workspace job cap under an advisory lock; SQLite's BEGIN IMMEDIATE holds the whole file instead
//   JSON update   json_set / jsonb_set; JSON fields read in SQL: json_extract / ->>
// Upserts (ON CONFLICT … DO UPDATE/NOTHING), RETURNING and row values are the same on both. The store binds the
// caller's clock for every time it writes, so there is no now() to translate; there are no boolean columns.

export type Params = Record<string, unknown>;
export type Row = Record<string, unknown>;

/** Statements on one engine: `all` for SELECT and RETURNING, `run` (rows changed) for the rest. */
export interface Sql {
  readonly dialect: Dialect;
  all(sql: string, params?: Params): Promise<Row[]>;
  run(sql: string, params?: Params): Promise<number>;
}

/** An open job database. */
export interface SqlDatabase extends Sql {
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface Dialect {
  readonly name: 'sqlite' | 'postgres';
  /** A time (ms since the epoch) as bound. */
  time(ms: number): unknown;
  /** A stored time as ms since the epoch. */
  readTime(value: unknown): number;
  /** A stored JSON value, parsed. */
  readJson(value: unknown): unknown;
  /** Appended to a SELECT inside a transaction that goes on to change the rows it read. */
  forUpdate: string;
  /** Appended to the SELECT of a claim: rows another process is claiming are skipped, not waited for. */
  skipLocked(table?: string): string;
  /** Run first in the transaction that checks and creates a workspace's jobs (param @key); null: not needed. */
  workspaceLock: string | null;
  /** Sets input.bytes to @bytes. */
  setInputBytes: string;
  /** True for a row (of table alias `t`) whose input is a URL not fetched yet. */
  needsFetch(t: string): string;
}

export const SQLITE: Dialect = {
  name: 'sqlite',
  time: (ms) => ms,
  readTime: (value) => Number(value),
  readJson: (value) => JSON.parse(value as string),
  forUpdate: '',
  skipLocked: () => '',
  workspaceLock: null,
  setInputBytes: `json_set(input, '$.bytes', @bytes)`,
  needsFetch: (t) => `(json_extract(${t}.input, '$.source') = 'url' AND json_extract(${t}.input, '$.bytes') IS NULL)`,
};

export const POSTGRES: Dialect = {
  name: 'postgres',
  time: (ms) => new Date(ms),
  readTime: (value) => (value as Date).getTime(),
  readJson: (value) => value,
  forUpdate: 'FOR UPDATE',
  skipLocked: (table) => `FOR UPDATE${table ? ` OF ${table}` : ''} SKIP LOCKED`,
  workspaceLock: 'SELECT pg_advisory_xact_lock(hashtextextended(@key, 0))',
  setInputBytes: `jsonb_set(input, '{bytes}', to_jsonb(@bytes::bigint))`,
  needsFetch: (t) => `(${t}.input->>'source' = 'url' AND ${t}.input->>'bytes' IS NULL)`,
};

/** A nullable time as bound / read. */
export const timeOrNull = (d: Dialect, ms: number | null): unknown => (ms === null ? null : d.time(ms));
export const readTimeOrNull = (d: Dialect, value: unknown): number | null => (value === null ? null : d.readTime(value));
export const readJsonOrNull = (d: Dialect, value: unknown): unknown => (value === null ? null : d.readJson(value));

/** `@name` placeholders → PostgreSQL's `$n` (a name used twice is one parameter) and the names in `$n` order. */
export function toPositional(sql: string): { text: string; names: string[] } {
  const names: string[] = [];
  const text = sql.replace(/@([A-Za-z_][A-Za-z0-9_]*)/g, (_, name: string) => {
    let i = names.indexOf(name);
    if (i < 0) i = names.push(name) - 1;
    return `$${i + 1}`;
  });
  return { text, names };
}
