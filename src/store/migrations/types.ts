// A numbered schema migration (one list per engine: ./sqlite.ts, ./postgres.ts).
export interface Migration {
  /** 1, 2, 3, …: the same number means the same schema change in every engine. */
  version: number;
  name: string;
  sql: string;
}
