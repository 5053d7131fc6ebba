// queue/: the job queue and the work done on it.
//   store/      JobStore engines: one implementation (queue-store.ts) over a dialect (dialect.ts) for SQLite jobs.db
//               and PostgreSQL (DATABASE_URL), numbered migrations per engine (migrations/)
//   runner.ts   claims jobs, leases and heartbeats, retries, retention, refunds
//   files.ts    where job inputs and results live (JOBS_DIR)
// Imports from outbound/ (downloads, webhook deliveries) and the shared files of src/jobs/, never from api/.
export { openJobStore, type JobStoreConfig } from './store';
export { JobRunner } from './runner';
export { JobFiles } from './files';
