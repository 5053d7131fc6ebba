// File workers yield the CPU to live streams: with FILE_WORK_NICE and FILE_WORK_IDLE their threads run niced and under
// SCHED_IDLE, as the kernel reports them (/proc/PID/task/TID/stat); the live worker runs at the server's priority.
import { execFileSync } from 'node:child_process';
import { loadConfig } from '../src/config';
import { createInferenceEngine } from '../src/inference/engine';
import { readThreadPriority } from '../src/inference/thread-priority';
import type { InferenceEngine } from '../src/inference/types';

const SCHED_IDLE = 5;
const SCHED_OTHER = 0;
const linux = process.platform === 'linux';
const hasChrt = linux && (() => {
  try {
    execFileSync('chrt', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

async function openLiveStream(engine: InferenceEngine): Promise<void> {
  const live = await engine.openLive!(
    { model: 'nsm-1', channels: 1, sampleRate: 16000, encoding: 'pcm_s16le', attenuationLimitDb: 0 },
    { output: () => undefined, error: () => undefined },
  );
  live.push(new Uint8Array(640));
  await live.end();
}

(linux ? describe : describe.skip)('worker thread priorities', () => {
  test.each([
    { idle: true, nice: 10 },
    { idle: false, nice: 7 },
  ])('file workers at nice $nice, SCHED_IDLE $idle; the live worker as the server', async ({ idle, nice }) => {
    const engine = await createInferenceEngine({ ...loadConfig(), workers: 2, fileWorkNice: nice, fileWorkIdle: idle }, { warmUp: false });
    try {
      await openLiveStream(engine);
      const threads = engine.workerPriorities!();
      expect(threads.filter((t) => !t.live)).toHaveLength(2);
      expect(threads.filter((t) => t.live)).toHaveLength(1);
      const ownPolicy = readThreadPriority(process.pid)!;
      for (const t of threads) {
        const kernel = readThreadPriority(t.priority!.tid!);
        expect(kernel).not.toBeNull();
        if (t.live) {
          expect(kernel).toEqual(ownPolicy); // not lowered
          expect(t.priority).toMatchObject({ nice: 0, idle: false });
        } else {
          expect(kernel!.nice).toBe(nice);
          // Where util-linux's chrt is there (Debian: always), the policy took; the worker reports what it got.
          expect(t.priority!.idle).toBe(idle && hasChrt);
          expect(kernel!.policy).toBe(t.priority!.idle ? SCHED_IDLE : SCHED_OTHER);
        }
      }
    } finally {
      await engine.close();
    }
  });
});
