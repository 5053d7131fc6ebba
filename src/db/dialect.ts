// Where SQLite and PostgreSQL differ, and nowhere else: both stores (src/store/gateway, src/store/jobs) are written
// once, with SQL that both engines accept, `@name` placeholders, and these dialect pieces for the rest:
//   placeholders  SQLite binds `@name` itself; PostgreSQL gets `$1, $2, …` (toPositional)
//   times         epoch-ms columns: SQLite INTEGER, PostgreSQL timestamptz (Date); ISO columns: SQLite TEXT as
//                 written, PostgreSQL timestamptz (read back as toISOString())
//   JSON          bound as text on both; read back as text (SQLite) or already parsed (jsonb); fields read in SQL:
//                 json_extract / ->>; set: json_set / jsonb_set
//   row locks     PostgreSQL locks the rows it reads in a transaction (FOR UPDATE, SKIP LOCKED for claims) and takes
//                 advisory locks; SQLite's BEGIN IMMEDIATE holds the whole file instead
//   functions     MAX(a, b) / GREATEST(a, b), the UTC day of a time, the column that orders rows as inserted
//   types         PostgreSQL needs a parameter's type where nothing around it tells (`@limit::bigint`)
// Upserts (ON CONFLICT … DO UPDATE/NOTHING), RETURNING (also of DELETE and of upserts) and row values are the same
// on both. The stores bind the caller's clock for every time they write, so there is no now() to translate;
// there are no boolean columns. Numbers come back from PostgreSQL's bigint columns as text: read them with Number().

export type Params = Record<string, unknown>;
export type Row = Record<string, unknown>;

/** Statements on one engine: `all` for SELECT and RETURNING, `run` (rows changed) for the rest. */
export interface Sql {
  readonly dialect: Dialect;
  all(sql: string, params?: Params): Promise<Row[]>;
  run(sql: string, params?: Params): Promise<number>;
}

/** An open database (./sqlite.ts, ./postgres.ts). */
export interface SqlDatabase extends Sql {
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface Dialect {
  readonly name: 'sqlite' | 'postgres';
  /** A time (ms since the epoch) as bound to an epoch-ms column. */
  time(ms: number): unknown;
  /** A stored epoch-ms column's time as ms since the epoch. */
  readTime(value: unknown): number;
  /** A stored ISO column's time as an ISO string (SQLite: the text as written). */
  readIso(value: unknown): string;
  /** A stored JSON value, parsed. */
  readJson(value: unknown): unknown;
  /** Appended to a SELECT inside a transaction that goes on to change the rows it read. */
  forUpdate: string;
  /** Appended to the SELECT of a claim: rows another process is claiming are skipped, not waited for. */
  skipLocked(table?: string): string;
  /** A statement run first in a transaction to serialise it with others of the same `@param` (null: not needed). */
  advisoryLock(param: string): string | null;
  /** A JSON field of a column, as SQL text (numbers and strings compare as written). */
  jsonField(column: string, field: string): string;
  /** The column's JSON with `field` set to the number `@param`. */
  jsonSetNumber(column: string, field: string, param: string): string;
  /** A parameter given the SQL type PostgreSQL cannot infer from where it stands (SQLite binds it as it is). */
  cast(param: string, type: 'bigint'): string;
  /** The larger of two SQL numbers. */
  greatest(a: string, b: string): string;
  /** 'YYYY-MM-DD' (UTC) of an ISO time column. */
  utcDay(column: string): string;
  /** The column that orders a table's rows as inserted (SQLite's rowid; the PostgreSQL tables here have `seq`). */
  insertOrder: string;
}

export const SQLITE: Dialect = {
  name: 'sqlite',
  time: (ms) => ms,
  readTime: (value) => Number(value),
  readIso: (value) => value as string,
  readJson: (value) => JSON.parse(value as string),
  forUpdate: '',
  skipLocked: () => '',
  advisoryLock: () => null,
  jsonField: (column, field) => `json_extract(${column}, '$.${field}')`,
  jsonSetNumber: (column, field, param) => `json_set(${column}, '$.${field}', @${param})`,
  cast: (param) => `@${param}`,
  greatest: (a, b) => `MAX(${a}, ${b})`,
  utcDay: (column) => `substr(${column}, 1, 10)`,
  insertOrder: 'rowid',
};

export const POSTGRES: Dialect = {
  name: 'postgres',
  time: (ms) => new Date(ms),
  readTime: (value) => (value as Date).getTime(),
  readIso: (value) => (value as Date).toISOString(),
  readJson: (value) => value,
  forUpdate: 'FOR UPDATE',
  skipLocked: (table) => `FOR UPDATE${table ? ` OF ${table}` : ''} SKIP LOCKED`,
  advisoryLock: (param) => `SELECT pg_advisory_xact_lock(hashtextextended(@${param}, 0))`,
  jsonField: (column, field) => `${column}->>'${field}'`,
  jsonSetNumber: (column, field, param) => `jsonb_set(${column}, '{${field}}', to_jsonb(@${param}::bigint))`,
  cast: (param, type) => `@${param}::${type}`,
  greatest: (a, b) => `GREATEST(${a}, ${b})`,
  utcDay: (column) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  insertOrder: 'seq',
};

/** A nullable time as bound / read. */
export const timeOrNull = (d: Dialect, ms: number | null): unknown => (ms === null ? null : d.time(ms));
export const readTimeOrNull = (d: Dialect, value: unknown): number | null => (value === null ? null : d.readTime(value));
export const readIsoOrNull = (d: Dialect, value: unknown): string | null => (value === null ? null : d.readIso(value));
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
