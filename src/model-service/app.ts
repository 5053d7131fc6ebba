// The model service's own HTTP app: /denoise, /denoise/batch, /models, /sample, /health; /internal/* for the gateway.
// It knows nothing about tokens or credits (the gateway in front does); its errors are {"detail": "..."}.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { PROJECT_ROOT, type Config } from '../config';
import type { InferenceEngine } from '../inference/types';
import { AudioAbortedError, AudioInputError, denoise, denoiseFile, type DenoiseStats } from '../pipeline';
import { createJobStreamRouter } from './job-stream';
import { createLiveStreamEndpoint } from './live-stream';
import type { ModelServiceMetrics } from './metrics';
import { FORMATS, type OutputFormat } from '../audio/formats';
import { loadCatalog } from './catalog';
import { audioErrorType, badRequest, HttpError, sendDetail, sendHttpError } from './http-error';
import { AdmissionGate, createGuard } from './guard';
import { FileBase64, sendJsonWithFiles } from './json-files';
import { cleanInputName, headerJson, OutputNamer, safeBaseName } from './names';
import { RequestDiskFloor, DISK_RETRY_AFTER_S } from './disk-floor';
import { sendBytes, sendFile, sendZip } from './downloads';
import { answerVideo } from './video-answer';
import { VideoRequestError } from '../video';
import { InsufficientStorageError } from '../storage/disk-budget';
import { assertModelInstalled, parseDenoiseParams, speechOf, type DenoiseParams, type EndpointKind, type SpeechSegment, type WithSpeechSegments } from './params';
import { STALE_MS, sweepStaleRequestDirs, withRequestScope, type RequestScope } from './request-scope';
import { DEFAULT_UPLOAD_LIMITS, receiveUpload, uploadInput, type UploadLimits } from './uploads';

export interface ModelServiceDeps {
  config: Config;
  engine: InferenceEngine;
  /** Diagnostics for unexpected (500) errors; defaults to stderr. */
  log?: (line: string) => void;
  /** Upload limits; the defaults are the spec's (100 MB per file, 25 files, 200 MB per batch). */
  limits?: Partial<UploadLimits>;
  /** Told about every denoised file (audio seconds, RTF by model) for GET /metrics. */
  metrics?: ModelServiceMetrics;
  /** The secret every request must present as `Authorization: Bearer <token>` (the gateway's). Required. */
  token: string;
}

/** The model service app plus its operational controls. */
export type ModelServiceApp = express.Express & {
  /** Admission control state (requests admitted at once). */
  readonly admission: AdmissionGate;
  /** From now on new requests get 503 + Retry-After (shutdown); in-flight ones continue; the temp sweep stops. */
  startDraining(): void;
  /** The start-up sweep of request directories left by dead processes (resolves with the number removed). */
  readonly swept: Promise<number>;
};

const contentTypeOf = (format: OutputFormat): string => FORMATS[format].contentType;

export const SERVICE_VERSION: string = (() => {
  try {
    return (JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
})();

export interface BatchItemOk extends WithSpeechSegments {
  index: number;
  input: string;
  status: 'ok';
  output: string;
  bytes: number;
  stats: DenoiseStats;
}

export interface BatchItemError {
  index: number;
  input: string;
  status: 'error';
  error: { type: 'invalid_audio' | 'processing_failed'; message: string };
}

export interface BatchManifest {
  model: string;
  output_format: string;
  files: number;
  succeeded: number;
  failed: number;
  processing_s: number;
  items: Array<BatchItemOk | BatchItemError>;
}

export function createModelServiceApp(deps: ModelServiceDeps): ModelServiceApp {
  const { config, engine } = deps;
  const log = deps.log ?? ((line: string) => process.stderr.write(line + '\n'));
  const limits: UploadLimits = { ...DEFAULT_UPLOAD_LIMITS, ...deps.limits };
  const startedAt = Date.now();
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Request directories of dead processes (kill -9) are removed at start, then periodically.
  const swept = sweepStaleRequestDirs(config.tmpDir);
  const sweeper = setInterval(() => void sweepStaleRequestDirs(config.tmpDir), STALE_MS).unref();

  const workers = () => Math.max(1, engine.state().size || config.workers);
  const admission = new AdmissionGate(workers() * config.modelQueuePerWorker);
  let draining = false;
  app.use(createGuard({ token: deps.token, gate: admission, batchUnits: workers, draining: () => draining }));

  const fail = (res: Response) => (err: unknown) => {
    if (err instanceof HttpError) return sendHttpError(res, err);
    if (err instanceof AudioInputError) return sendDetail(res, err.status, err.message, audioErrorType(err));
    if (err instanceof AudioAbortedError) return; // the client is gone
    if (err instanceof VideoRequestError) return sendDetail(res, 400, err.message, 'invalid_request');
    if (err instanceof InsufficientStorageError) {
      if (!res.headersSent) res.setHeader('Retry-After', String(DISK_RETRY_AFTER_S));
      return sendDetail(res, 503, err.message, 'unavailable');
    }
    log(`[model-service] internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    sendDetail(res, 500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
  };

  /** Uploads, then options: options that precede the file are already checked while it streams in. */
  async function receive(kind: EndpointKind, scope: RequestScope, req: Request, res: Response) {
    if (!req.is('multipart/form-data')) {
      throw badRequest(`send multipart/form-data with the audio in "${kind === 'single' ? 'file' : 'files'}"`);
    }
    const { files, reference } = await receiveUpload(config, kind, scope, req, res, limits);
    const params = parseDenoiseParams(config, kind, req.body as Record<string, unknown>);
    if (files.length === 0) {
      throw badRequest(
        kind === 'single'
          ? 'missing file: send the audio as the multipart file field "file"'
          : 'missing files: send each audio file as a repeated multipart file field "files"',
      );
    }
    assertModelInstalled(config, params.model, params.speech);
    return { files, params, reference };
  }

  const diskFloor = new RequestDiskFloor(config);
  const pipelineOptions = (params: DenoiseParams, signal: AbortSignal) => ({
    disk: diskFloor.budget,
    model: params.model,
    attenuationLimitDb: params.attenuationLimitDb,
    outputFormat: params.outputFormat,
    loudnessLufs: params.loudnessLufs,
    keepInputSampleRate: params.keepInputSampleRate,
    speech: params.speech,
    signal,
  });

  app.post('/denoise', (req, res) =>
    withRequestScope(
      config,
      res,
      async (scope) => {
        await diskFloor.check(req);
        const { files, params, reference } = await receive('single', scope, req, res);
        const upload = files[0];
        // The echo reference (docs/echo.md): removed from the file before the model.
        const echoReference = reference ? uploadInput(reference, scope) : null;
        if (params.video) {
          const video = { config, engine, disk: diskFloor.budget, metrics: deps.metrics };
          await answerVideo(video, scope, upload, params.response, { ...pipelineOptions(params, scope.signal), echoReference }, res);
          return;
        }
        const ext = params.outputFormat;
        let segments: SpeechSegment[] | undefined;
        const { stats, output } = await denoise(
          { config, engine },
          uploadInput(upload, scope),
          { inMemory: true, path: async () => path.join(await scope.dir(), `output.${ext}`) },
          { ...pipelineOptions(params, scope.signal), onSpeechSegments: (s) => (segments = s), echoReference },
        );
        deps.metrics?.fileDone(stats);
        const filename = `${safeBaseName(upload.originalname)}_denoised.${ext}`;
        res.setHeader('X-NS-Stats', headerJson(stats));
        const body = 'memory' in output ? output.memory : output.path;
        if (params.response === 'json') {
          await sendJsonWithFiles(res, 200, { filename, stats, ...speechOf(segments), audio_base64: new FileBase64(body) });
          return;
        }
        if (typeof body === 'string') await sendFile(res, body, contentTypeOf(ext), filename);
        else sendBytes(res, body, contentTypeOf(ext), filename);
      },
      fail(res),
    ),
  );

  app.post('/denoise/batch', (req, res) =>
    withRequestScope(
      config,
      res,
      async (scope) => {
        await diskFloor.check(req);
        const { files, params } = await receive('batch', scope, req, res);
        const started = process.hrtime.bigint();
        const ext = params.outputFormat;
        const dir = await scope.dir();
        const outputs: string[] = files.map((_, i) => path.join(dir, `output-${i}.${ext}`));
        const results: Array<DenoiseStats | Error> = new Array(files.length);
        const segments: Array<SpeechSegment[] | undefined> = new Array(files.length);

        // Bounded concurrency: as many files at once as the engine has workers.
        let next = 0;
        const workers = Math.max(1, Math.min(files.length, engine.state().size || 1));
        await Promise.all(
          Array.from({ length: workers }, async () => {
            while (next < files.length && !scope.signal.aborted) {
              const i = next++;
              try {
                const stats = await denoiseFile(
                  { config, engine },
                  files[i].path,
                  outputs[i],
                  { ...pipelineOptions(params, scope.signal), onSpeechSegments: (s) => (segments[i] = s) },
                );
                results[i] = stats;
                deps.metrics?.fileDone(stats);
              } catch (err) {
                results[i] = err instanceof Error ? err : new Error(String(err));
              } finally {
                // The input is no longer needed; free the disk early on big batches.
                await fsp.rm(files[i].path, { force: true });
              }
            }
          }),
        );
        if (scope.signal.aborted) throw new AudioAbortedError();

        const namer = new OutputNamer();
        const items: Array<BatchItemOk | BatchItemError> = [];
        for (let i = 0; i < files.length; i++) {
          const input = cleanInputName(files[i].originalname);
          const result = results[i];
          if (result instanceof Error) {
            // Aborted, or the disk is short (503, to retry whole): no zip of what happened to fit.
            if (result instanceof AudioAbortedError || result instanceof InsufficientStorageError) throw result;
            if (!(result instanceof AudioInputError)) log(`[model-service] batch item ${i} failed: ${result.stack ?? result.message}`);
            items.push({
              index: i,
              input,
              status: 'error',
              error: {
                type: result instanceof AudioInputError ? 'invalid_audio' : 'processing_failed',
                message: result.message,
              },
            });
            continue;
          }
          const bytes = (await fsp.stat(outputs[i])).size;
          items.push({ index: i, input, status: 'ok', output: namer.take(safeBaseName(files[i].originalname), ext), bytes, stats: result, ...speechOf(segments[i]) });
        }
        const succeeded = items.filter((it) => it.status === 'ok').length;
        const manifest: BatchManifest = {
          model: params.model,
          output_format: ext,
          files: files.length,
          succeeded,
          failed: files.length - succeeded,
          processing_s: Math.round(Number(process.hrtime.bigint() - started) / 1e6) / 1000,
          items,
        };
        res.setHeader(
          'X-NS-Batch',
          headerJson({
            files: manifest.files,
            succeeded: manifest.succeeded,
            failed: manifest.failed,
            processing_s: manifest.processing_s,
            // Extensions (not in the spec's summary): what the batch ran and the audio it cleaned.
            model: manifest.model,
            duration_s: Math.round(items.reduce((sum, it) => sum + (it.status === 'ok' ? it.stats.duration_s : 0), 0) * 1000) / 1000,
          }),
        );

        if (params.response === 'json') {
          const withAudio = {
            ...manifest,
            items: items.map((it) => (it.status === 'ok' ? { ...it, audio_base64: new FileBase64(outputs[it.index]) } : it)),
          };
          await sendJsonWithFiles(res, 200, withAudio);
          return;
        }
        await sendZip(res, manifest, outputs);
      },
      fail(res),
    ),
  );

  app.get('/models', (_req, res) => {
    res.json(loadCatalog(config));
  });

  app.get('/sample', async (_req, res) => {
    const samplePath = path.join(config.modelsDir, 'sample.wav');
    try {
      await fsp.access(samplePath, fs.constants.R_OK);
    } catch {
      return sendDetail(res, 404, 'the sample clip is not installed (run `npm run models`)');
    }
    try {
      await sendFile(res, samplePath, 'audio/wav', 'sample.wav', 'inline');
    } catch (err) {
      fail(res)(err);
    }
  });

  app.get('/health', (_req, res) => {
    const catalog = loadCatalog(config);
    const installed = catalog.models.filter((m) => m.available).map((m) => m.id);
    res.json({
      status: installed.length > 0 ? 'ok' : 'degraded',
      version: SERVICE_VERSION,
      models: installed,
      default_model: catalog.default,
      workers: engine.state(),
      admission: (({ inUse, capacity, rejected, admitted }) => ({ in_use: inUse, capacity, admitted, rejected }))(admission.state()),
      uptime_s: Math.round((Date.now() - startedAt) / 1000),
    });
  });

  // The gateway's internal endpoints: job streams (job-stream.ts), live streams over WebSocket (live-stream.ts).
  app.use(createJobStreamRouter({ config, engine, log, metrics: deps.metrics, disk: diskFloor.budget }));
  const live = createLiveStreamEndpoint({ config, engine, log });
  app.use(live.router);

  app.use((req: Request, res: Response) => {
    sendDetail(res, 404, `no such endpoint: ${req.method} ${req.path}`);
  });
  // Express calls this for errors thrown outside withRequestScope (e.g. malformed URLs).
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = (err as { status?: number }).status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return sendDetail(res, status, (err as Error).message || 'bad request');
    }
    fail(res)(err);
  });
  return Object.assign(app, {
    admission,
    swept,
    startDraining() {
      draining = true;
      live.startDraining(config.shutdownGraceMs); // open live streams: the grace, then 1012
      // Shutting down: the periodic sweep of dead processes' directories stops with the service.
      clearInterval(sweeper);
    },
  });
}
