// api/: the HTTP side of jobs.
//   api.ts, params.ts, errors.ts   the /v1/noise-suppressor/jobs endpoints behind the gateway's policies
//   upload.ts                      receiving an upload: client clock, disk budget per chunk
//   routes.ts                      the upload limit of POST /jobs in the gateway's route table
//   console-api.ts                 the console's Jobs page API
//   cancel.ts                      canceling a job (both APIs)
// Imports from queue/ and outbound/ and the shared files of src/jobs/; nothing imports api/ but src/jobs/index.ts.
export { createJobsHandler } from './api';
export { createJobsConsoleRouter } from './console-api';
export { configureJobRoutes } from './routes';
