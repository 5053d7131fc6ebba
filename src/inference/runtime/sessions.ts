// Loads the two DTLN graphs with the options the pool relies on: one thread per session (parallelism comes from the
// worker pool), full graph optimisation.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { DtlnGraphs } from '../models/dtln';
import { STAGE1_FILE, STAGE2_FILE } from '../models/specs';

export const SESSION_OPTIONS: ort.InferenceSession.SessionOptions = {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
};

export async function loadGraphs(modelsDir: string): Promise<DtlnGraphs> {
  const files = [STAGE1_FILE, STAGE2_FILE].map((f) => path.join(modelsDir, f));
  for (const f of files) {
    if (!fs.existsSync(f)) throw new Error(`model graph ${f} is missing: run "npm run models" first`);
  }
  const [stage1, stage2] = await Promise.all(files.map((f) => ort.InferenceSession.create(f, SESSION_OPTIONS)));
  removeOrtDebugLog();
  return { stage1, stage2 };
}

/**
 * ONNX Runtime's bundled telemetry SDK creates an empty `<tmpdir>/mat-debug-<pid>.log` when its environment starts
 * (once per process, at the first session) and never writes to it; no option turns that off, so it is removed here:
 * otherwise every server, CLI run and test process leaves one behind. Also removed: such empty files of processes that
 * are gone (killed before they got here: a chaos run found one left by a process of its own, 1 in 5 runs).
 */
export function removeOrtDebugLog(): void {
  const dir = os.tmpdir();
  let names: string[] = [];
  try {
    names = fs.readdirSync(dir).filter((n) => /^mat-debug-\d+\.log$/.test(n));
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(name.slice('mat-debug-'.length, -'.log'.length));
    if (pid !== process.pid && processAlive(pid)) continue;
    const file = path.join(dir, name);
    try {
      if (fs.statSync(file).size === 0) fs.rmSync(file, { force: true });
    } catch {
      // removed meanwhile, or not ours to remove
    }
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
