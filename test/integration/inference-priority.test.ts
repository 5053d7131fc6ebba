// File work yields the CPU to live streams: with FILE_WORK_NICE and FILE_WORK_IDLE the file workers' threads and the
// ffmpeg children run niced and under SCHED_IDLE, as the kernel reports them (/proc/PID/task/TID/stat); the live
// workers run at the server's priority.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { spawnFfmpeg, waitForExit } from '../../src/audio/ffmpeg';
import { loadConfig } from '../../src/config';
import { CHRT_PATH } from '../../src/config/system-tools';
import { createInferenceEngine } from '../../src/inference/runtime/engine';
import { readThreadPriority } from '../../src/inference/runtime/thread-priority';
import type { InferenceEngine } from '../../src/inference/types';

const SCHED_IDLE = 5;
const SCHED_OTHER = 0;
const linux = process.platform === 'linux';
// Debian ships util-linux's chrt in every image; checked here so that the expectations say what this machine can do.
const hasChrt = CHRT_PATH !== null && (() => {
  try {
    execFileSync(CHRT_PATH, ['--version'], { stdio: 'ignore' });
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
  ])('file workers at nice $nice, SCHED_IDLE $idle; the live workers as the server', async ({ idle, nice }) => {
    // Two live workers (the default on two cores or more), set here so the count does not depend on this machine's.
    const engine = await createInferenceEngine({ ...loadConfig(), workers: 2, liveWorkers: 2, fileWorkNice: nice, fileWorkIdle: idle }, { warmUp: false });
    try {
      await openLiveStream(engine);
      // Live streams start once one live worker is ready; the other reports its priority when it is.
      let threads = engine.workerPriorities!();
      for (let i = 0; i < 200 && threads.some((t) => t.priority === null); i++) {
        await new Promise((r) => setTimeout(r, 50));
        threads = engine.workerPriorities!();
      }
      expect(threads.filter((t) => !t.live)).toHaveLength(2);
      expect(threads.filter((t) => t.live)).toHaveLength(2);
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

(linux ? describe : describe.skip)('ffmpeg children of file work', () => {
  test.each([
    { idle: true, nice: 10 },
    { idle: false, nice: 7 },
    { idle: false, nice: 0 },
  ])('nice $nice, SCHED_IDLE $idle: as asked, and the process is ffmpeg itself (chrt execs it: same pid)', async ({ idle, nice }) => {
    const { ffmpegPath } = loadConfig();
    const child = spawnFfmpeg({ ffmpegPath, fileWorkNice: nice, fileWorkIdle: idle }, [
      '-re', '-f', 'lavfi', '-i', 'anullsrc=r=16000:cl=mono', '-t', '30', '-f', 'null', '-', // real time: still running when looked at
    ]);
    try {
      // chrt execs ffmpeg in the same process: wait for that exec (up to 5 s), not a fixed 300 ms, which a loaded machine
      // overran once (the process still chrt when read: CI on 57c1129).
      const comm = (): string => fs.readFileSync(`/proc/${child.pid}/comm`, 'utf8').trim();
      for (let waited = 0; comm() !== 'ffmpeg' && waited < 5000; waited += 50) await new Promise((r) => setTimeout(r, 50));
      const kernel = readThreadPriority(child.pid!, child.pid!);
      expect(kernel).toEqual({ nice, policy: idle && hasChrt ? SCHED_IDLE : SCHED_OTHER });
      expect(comm()).toBe('ffmpeg');
    } finally {
      child.kill('SIGTERM');
      await waitForExit(child).catch(() => undefined);
    }
  });
});
