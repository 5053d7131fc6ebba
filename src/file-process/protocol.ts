// Messages between `npm start` and its file-work process (the model service as a child, src/file-process/index.ts)
// over Node's IPC channel. Requests themselves go over loopback HTTP, as to any model service.
import type { MetricsJson } from '../metrics';

export type { MetricsJson };

export type FromFileProcess =
  | { type: 'listening'; url: string }
  | { type: 'ready'; workers: number; slots: number; startup_ms: number; swept_dirs: number }
  | { type: 'metrics'; id: number; metrics?: MetricsJson; error?: string };

export type ToFileProcess = { type: 'metrics'; id: number };
