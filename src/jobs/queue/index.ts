// queue/: the work done on the job queue (the queue itself, JobStore on SQLite jobs.db or PostgreSQL, is
// src/store/jobs/).
//   runner.ts   claims jobs into fetch and processing slots (fair share across workspaces), retries
//   lease.ts    a running job's lease and heartbeat; housekeeping.ts: reclaims, refunds, retention
//   files.ts    where job inputs and results live (JOBS_DIR), the startup sweep of dead writers' partial files
//   model-client.ts  runner → model service over HTTP
// Imports from outbound/ (downloads, webhook deliveries) and the shared files of src/jobs/, never from api/.
export { JobRunner } from './runner';
export { JobFiles } from './files';
