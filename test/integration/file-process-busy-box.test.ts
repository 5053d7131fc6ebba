// npm start on a box that other programs keep busy: the file-work process starts at normal policy and is lowered to
// SCHED_IDLE once ready, so the server listens while a busy loop holds the only core it may use. Started under
// SCHED_IDLE (before 2026-11-30) it got no CPU until the loop ended, and the server, which listens only once its
// file-work process is ready, did not listen either. Once listening every thread of the child is SCHED_IDLE, and file
// calls work when the loop is gone.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { CHRT_PATH } from '../../src/config/system-tools';
import { readThreadPriority } from '../../src/inference/runtime/thread-priority';
import { denoise, filePid, startServer, stop, type Server } from '../helpers/file-process-helpers';
import { fixture } from '../helpers/service-helpers';

const SCHED_IDLE = 5;
const TASKSET = ['/usr/bin/taskset', '/bin/taskset'].find((p) => fs.existsSync(p)) ?? null;
// util-linux has both on every Debian; elsewhere (no chrt) file work is only niced and there is nothing to test.
const linux = process.platform === 'linux' && CHRT_PATH !== null && TASKSET !== null;

(linux ? test : test.skip)('with a busy loop on its only core, the server listens, then its file-work process is SCHED_IDLE', async () => {
  const cpu = '0';
  expect(spawnSync(TASKSET!, ['-c', cpu, 'true']).status).toBe(0);
  // 90 s at most: far longer than the start-up takes now, and what the old start-up would have waited for.
  const loop: ChildProcess = spawn(TASKSET!, ['-c', cpu, process.execPath, '-e', 'const end = Date.now() + 90000; while (Date.now() < end) {}'], { stdio: 'ignore' });
  const loopGone = new Promise((r) => loop.once('exit', r));
  let server: Server | undefined;
  try {
    await new Promise((r) => setTimeout(r, 300)); // the loop is running before the server starts
    expect(loop.exitCode).toBeNull();
    // FILE_WORK_NICE 0: the start-up then shares the core with the loop at full weight (niced it takes ~10× longer),
    // so what this measures is SCHED_IDLE alone. startServer waits 30 s for "listening on".
    const t0 = Date.now();
    server = await startServer({ FILE_WORK_NICE: '0', FILE_WORK_IDLE: 'true' }, undefined, [TASKSET!, '-c', cpu]);
    const startMs = Date.now() - t0;
    expect(loop.exitCode).toBeNull(); // the loop was still running when the server listened
    const pid = filePid(server);
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) expect(readThreadPriority(Number(tid), pid)?.policy).toBe(SCHED_IDLE);
    expect(readThreadPriority(server.child.pid!, server.child.pid!)?.policy).toBe(0);
    loop.kill('SIGKILL');
    await loopGone;
    const r = await denoise(server, fixture('speech-noisy-16k-mono.wav'));
    expect(r.status).toBe(200);
    console.log(`listening after ${startMs} ms beside the busy loop`);
  } finally {
    if (loop.exitCode === null && loop.signalCode === null) loop.kill('SIGKILL');
    await loopGone;
    if (server) await stop(server);
  }
}, 120_000);
