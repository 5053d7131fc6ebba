// The one migration runner of every store (gateway and jobs, SQLite and PostgreSQL): a plan `{table, lock,
// migrations}` is applied in one transaction under a lock, each pending migration once, in order, and recorded as a
// (version, name, applied_at) row in `table`. The steps are written once, below, as a generator; a driver runs them
// (./sqlite.ts synchronously on better-sqlite3, ./postgres.ts asynchronously on pg).
// Hand-written rather than a library (umzug, postgrator, node-pg-migrate): those are asynchronous or PostgreSQL-only
// and keep their own table formats, while the SQLite stores open synchronously and the tables that existing
// databases already have (schema_migrations, jobs_schema_migrations) must keep their rows as they are.

/** A numbered schema change. The same number means the same change in every engine. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export interface MigrationPlan {
  /** Where applied versions are recorded: (version, name, applied_at). */
  table: string;
  /** PostgreSQL advisory-lock key that serialises migrating processes (SQLite takes its write lock instead). */
  lock: number;
  /** Versions 1, 2, 3, … in order. APPEND ONLY: a migration that has shipped is never edited. */
  migrations: readonly Migration[];
  /** How the error begins when the database is newer than this build, e.g. "the job tables are" (default: the
   *  driver's, "the database is" or "<file> is"). */
  subject?: string;
}

export interface MigrationResult {
  /** Versions applied by this call, in order (empty when the schema was up to date). */
  applied: number[];
  /** The schema version now. */
  version: number;
}

/** One thing the runner asks its driver to do; `current` answers with the highest recorded version (0 for none). */
export type MigrationStep =
  | { do: 'begin'; table: string; lock: number }
  | { do: 'current'; table: string }
  | { do: 'apply'; table: string; migration: Migration }
  | { do: 'commit' };

/** The runner: what to do, in order. A driver answers each step and rolls back when a step throws. */
export function* migrationSteps(plan: MigrationPlan, subject: string): Generator<MigrationStep, MigrationResult, number | void> {
  checkPlan(plan);
  yield { do: 'begin', table: plan.table, lock: plan.lock };
  const current = (yield { do: 'current', table: plan.table }) ?? 0;
  const latest = plan.migrations.length === 0 ? 0 : plan.migrations[plan.migrations.length - 1].version;
  if (current > latest) {
    throw new Error(
      `${plan.subject ?? subject} at schema version ${current}, newer than this build knows (${latest}); upgrade the service`,
    );
  }
  const applied: number[] = [];
  for (const migration of plan.migrations) {
    if (migration.version <= current) continue;
    yield { do: 'apply', table: plan.table, migration };
    applied.push(migration.version);
  }
  yield { do: 'commit' };
  return { applied, version: Math.max(current, ...applied) };
}

/** A plan that could corrupt the record is refused before anything runs. */
function checkPlan(plan: MigrationPlan): void {
  if (!/^[a-z_][a-z0-9_]*$/.test(plan.table)) throw new Error(`bad migrations table name "${plan.table}"`);
  plan.migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`${plan.table}: migration #${i + 1} has version ${m.version}; versions are 1, 2, 3, … in order`);
  });
}

/** Drives the steps with a synchronous driver (better-sqlite3). */
export function runMigrationsSync(steps: Generator<MigrationStep, MigrationResult, number | void>, answer: (s: MigrationStep) => number | void, rollback: () => void): MigrationResult {
  try {
    let next = steps.next();
    while (!next.done) next = steps.next(answer(next.value));
    return next.value;
  } catch (err) {
    rollback();
    throw err;
  }
}

/** Drives the steps with an asynchronous driver (pg). */
export async function runMigrations(
  steps: Generator<MigrationStep, MigrationResult, number | void>,
  answer: (s: MigrationStep) => Promise<number | void>,
  rollback: () => Promise<void>,
): Promise<MigrationResult> {
  try {
    let next = steps.next();
    while (!next.done) next = steps.next(await answer(next.value));
    return next.value;
  } catch (err) {
    await rollback().catch(() => undefined);
    throw err;
  }
}
