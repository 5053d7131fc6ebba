// The jobs routes live in the gateway's route table (src/gateway/routes.ts, scope noise-suppressor:jobs, target
// 'jobs'); this applies the configured upload limit (JOBS_MAX_UPLOAD_MB) to POST /jobs.
import type { Config } from '../../config';
import { MULTIPART_OVERHEAD_BYTES } from '../../gateway/routes';
import type { EndpointSpec } from '../../gateway/types';

export function configureJobRoutes(routes: EndpointSpec[], config: Pick<Config, 'jobs'>): EndpointSpec[] {
  return routes.map((r) =>
    r.target === 'jobs' && r.method === 'POST' && r.endpoint === 'jobs'
      ? { ...r, maxBodyBytes: config.jobs.maxUploadBytes + MULTIPART_OVERHEAD_BYTES }
      : r,
  );
}
