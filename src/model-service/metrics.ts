// Model-service metrics (prom-client): audio processed per model, processing time and real-time factor, and the
// inference engine's live state (queue, busy workers) read at scrape time.
import client, { type Registry } from 'prom-client';
import type { PoolState } from '../inference/types';

/** Real-time factor buckets (processing seconds per audio second). */
const RTF_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2];

/** What the model service reports per denoised file. */
export interface FileStats {
  model: string;
  duration_s: number;
  processing_s: number;
  rtf: number;
}

export interface ModelServiceMetrics {
  /** One file denoised (each item of a batch counts). */
  fileDone(stats: FileStats): void;
}

/** Model-service metrics: audio processed per model and the engine's live state (read at scrape time). */
export function createModelServiceMetrics(registry: Registry, sources: { engine: () => PoolState | null }): ModelServiceMetrics {
  const audio = new client.Counter({
    name: 'ns_audio_seconds_total',
    help: 'Seconds of audio denoised, by model.',
    labelNames: ['model'] as const,
    registers: [registry],
  });
  const processing = new client.Counter({
    name: 'ns_processing_seconds_total',
    help: 'Wall seconds spent denoising files (decode, inference, encode), by model.',
    labelNames: ['model'] as const,
    registers: [registry],
  });
  const files = new client.Counter({
    name: 'ns_files_total',
    help: 'Files denoised, by model (each item of a batch counts).',
    labelNames: ['model'] as const,
    registers: [registry],
  });
  const rtf = new client.Histogram({
    name: 'ns_rtf',
    help: 'Real-time factor per file (processing seconds per audio second), by model.',
    labelNames: ['model'] as const,
    buckets: RTF_BUCKETS,
    registers: [registry],
  });
  const gauge = (name: string, help: string, pick: (s: PoolState) => number) =>
    new client.Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const state = sources.engine();
        if (state) this.set(pick(state));
      },
    });
  gauge('ns_engine_workers', 'Inference worker threads in the pool.', (s) => s.size);
  gauge('ns_engine_busy_workers', 'Workers running an inference job now.', (s) => s.busy);
  gauge('ns_engine_queue_depth', 'Inference jobs waiting for a free worker.', (s) => s.queued);
  gauge('ns_engine_streams', 'Files being denoised now (open engine streams).', (s) => s.streams);
  gauge('ns_engine_worker_restarts', 'Workers restarted after a crash since the engine started.', (s) => s.restarts);

  return {
    fileDone(stats) {
      const labels = { model: stats.model };
      audio.inc(labels, Math.max(0, stats.duration_s));
      processing.inc(labels, Math.max(0, stats.processing_s));
      files.inc(labels);
      if (stats.duration_s > 0) rtf.observe(labels, stats.rtf);
    },
  };
}
