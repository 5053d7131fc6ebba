// The gateway store's migration plans for the runner in src/db: where the versions are recorded (schema_migrations,
// as in every database written so far) and the advisory-lock key PostgreSQL replicas migrate under.
import type { MigrationPlan } from '../../../db/migrations';
import { POSTGRES_MIGRATIONS } from './postgres';
import { SQLITE_MIGRATIONS } from './sqlite';

const TABLE = 'schema_migrations';
/** Any constant unique to this schema (the job tables use 7_426_117_302). */
const LOCK = 7_426_117_301;

export const SQLITE_PLAN: MigrationPlan = { table: TABLE, lock: LOCK, migrations: SQLITE_MIGRATIONS };
export const POSTGRES_PLAN: MigrationPlan = { table: TABLE, lock: LOCK, migrations: POSTGRES_MIGRATIONS };
