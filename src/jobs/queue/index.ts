// queue/: the job queue and the work done on it.
//   store/      JobStore engines: one implementation (queue-store.ts) over a dialect (dialect.ts) for SQLite jobs.db
//               and PostgreSQL (DATABASE_URL), numbered migrations per engine (migrations/)
//   runner.ts   claims jobs into fetch and processing slots (fair share across workspaces), retries
//   lease.ts    a running job's lease and heartbeat; housekeeping.ts: reclaims, refunds, retention
//   files.ts    where job inputs and results live (JOBS_DIR), the startup sweep of dead writers' partial files
//   model-client.ts  runner → model service over HTTP
// Imports from outbound/ (downloads, webhook deliveries) and the shared files of src/jobs/, never from api/.
export { openJobStore, type JobStoreConfig } from './store';
export { JobRunner } from './runner';
export { JobFiles } from './files';
