// /denoise with output_format=video: the upload's container back with its first audio track cleaned (src/video),
// sent as one file with its exact length (or base64 in JSON, `video_base64`). The remuxed file is about as big as the
// upload: it is taken from the free-disk floor's budget before the work starts.
import path from 'node:path';
import type { Response } from 'express';
import type { Config } from '../config';
import type { InferenceEngine } from '../inference/types';
import type { DenoiseFileOptions } from '../pipeline';
import { InsufficientStorageError, type DiskBudget } from '../storage/disk-budget';
import { CONTAINERS, denoiseVideo, planVideo, type VideoStats } from '../video';
import { sendFile } from './downloads';
import { FileBase64, sendJsonWithFiles } from './json-files';
import type { ModelServiceMetrics } from './metrics';
import { headerJson, safeBaseName } from './names';
import type { RequestScope } from './request-scope';
import { uploadInput } from './uploads';

export interface VideoAnswerDeps {
  config: Config;
  engine: InferenceEngine;
  disk: Pick<DiskBudget, 'open'>;
  metrics?: ModelServiceMetrics;
}

export async function answerVideo(
  deps: VideoAnswerDeps,
  scope: RequestScope,
  upload: Express.Multer.File,
  response: string,
  opts: Omit<DenoiseFileOptions, 'outputFormat'>,
  res: Response,
): Promise<VideoStats> {
  const input = uploadInput(upload, scope);
  const inputPath = typeof input === 'string' ? input : await input.spill();
  const plan = await planVideo(deps, inputPath, upload.originalname);
  const spec = CONTAINERS[plan.container];
  const claim = await deps.disk.open(upload.size);
  if (!claim) throw new InsufficientStorageError('the server is short of disk space for this video; retry later');
  const output = path.join(await scope.dir(), `output.${spec.extension}`);
  let stats: VideoStats;
  try {
    stats = await denoiseVideo(deps, inputPath, output, plan, opts);
  } finally {
    claim.release();
  }
  deps.metrics?.fileDone(stats);
  const filename = `${safeBaseName(upload.originalname)}_denoised.${spec.extension}`;
  res.setHeader('X-NS-Stats', headerJson(stats));
  if (response === 'json') await sendJsonWithFiles(res, 200, { filename, stats, video_base64: new FileBase64(output) });
  else await sendFile(res, output, spec.contentType, filename);
  return stats;
}
