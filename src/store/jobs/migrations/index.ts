// The job tables' migration plans for the runner in src/db: versions recorded in jobs_schema_migrations (as in every
// jobs.db and PostgreSQL database written so far), PostgreSQL replicas migrating under their own advisory lock.
import type { MigrationPlan } from '../../../db/migrations';
import { POSTGRES_JOB_MIGRATIONS } from './postgres';
import { SQLITE_JOB_MIGRATIONS } from './sqlite';

const TABLE = 'jobs_schema_migrations';
/** Distinct from the gateway store's 7_426_117_301. */
const LOCK = 7_426_117_302;

export const SQLITE_JOBS_PLAN: MigrationPlan = { table: TABLE, lock: LOCK, migrations: SQLITE_JOB_MIGRATIONS };
export const POSTGRES_JOBS_PLAN: MigrationPlan = { table: TABLE, lock: LOCK, migrations: POSTGRES_JOB_MIGRATIONS, subject: 'the job tables are' };
