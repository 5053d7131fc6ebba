// Issue 35, item 4: the file-work process killed again and again, during its start-up too (right after its spawn,
// before it is ready, several times in a row), keeps coming back with a doubling backoff (0.5 s, 1 s, 2 s, … at most
// 10 s by default; here FILE_WORK_RESTART_SECONDS starts it at 50 ms, which does not change what is checked and spares
// 14 s of waiting) for as long as the server runs: each time it is ready again, /readyz is 200 again, /denoise answers
// 200, and a job submitted while it was down completes. Real server, real child, kill -9 from outside.
import { denoise, childPids, filePid, startServer, stop, type Server } from '../helpers/file-process-helpers';
import { eventually, fixture, multipartBody, noiseWav, rawRequest } from '../helpers/service-helpers';

const JOBS = '/v1/noise-suppressor/jobs';

/** The next child of the server that is not one of `seen`, as soon as it exists (polled every 2 ms). */
async function nextChild(s: Server, seen: Set<number>, timeoutMs: number): Promise<number> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const fresh = childPids(s.child.pid!).find((p) => !seen.has(p));
    if (fresh !== undefined) {
      seen.add(fresh);
      return fresh;
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  throw new Error(`no new file-work process within ${timeoutMs} ms; server log:\n${s.output().slice(-3000)}`);
}

const readyz = async (s: Server): Promise<number> => (await rawRequest(`${s.url}/readyz`, {})).status;

async function job(s: Server, id: string): Promise<{ status: string; error: unknown }> {
  const res = await rawRequest(`${s.url}${JOBS}/${id}`, { headers: { Authorization: `Bearer ${s.token}` } });
  return JSON.parse(res.body.toString()) as { status: string; error: unknown };
}

(process.platform === 'linux' ? describe : describe.skip)('file-work process restarts (issue 35, item 4)', () => {
  test('killed repeatedly, during start-up too: always restarted with backoff; ready, /denoise and a queued job work after', async () => {
    const s = await startServer({ UPSTREAM_HEALTH_INTERVAL_MS: '200', BREAKER_COOLDOWN_MS: '500', FILE_WORK_RESTART_SECONDS: '0.05' });
    try {
      const seen = new Set<number>([filePid(s)]);
      expect(await readyz(s)).toBe(200);

      // 1. The ready child, killed.
      process.kill(filePid(s), 'SIGKILL');
      await eventually(async () => (await readyz(s)) === 503, 10_000);

      // A job submitted while it is down stays queued until the child is back.
      const { body, contentType } = multipartBody([
        { name: 'model', value: 'nsm-1' },
        { name: 'file', filename: 'a.wav', data: noiseWav(1) },
      ]);
      const submitted = await rawRequest(`${s.url}${JOBS}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': contentType, 'Content-Length': body.length },
        body,
      });
      expect(submitted.status).toBe(202);
      const jobId = (JSON.parse(submitted.body.toString()) as { id: string }).id;

      // 2, 3. Its replacements, killed right after their spawn, twice in a row.
      const killedAtSpawn: number[] = [];
      for (let i = 0; i < 2; i++) {
        const pid = await nextChild(s, seen, 20_000);
        process.kill(pid, 'SIGKILL');
        killedAtSpawn.push(pid);
      }
      // 4. The next one, killed 200 ms into its start-up (the engine takes longer to load).
      const starting = await nextChild(s, seen, 20_000);
      await new Promise((r) => setTimeout(r, 200));
      process.kill(starting, 'SIGKILL');

      // 5. The next one is left alone: it comes back ready, on the same URL.
      const back = await nextChild(s, seen, 30_000);
      await eventually(() => s.lines().some((l) => l.event === 'file_process_restarted' && l.pid === back), 60_000);
      await eventually(async () => (await readyz(s)) === 200, 15_000);
      const first = await denoise(s, fixture('speech-noisy-16k-mono.wav'));
      expect({ status: first.status, body: first.status === 200 ? '' : first.body.toString() }).toEqual({ status: 200, body: '' });
      await eventually(async () => (await job(s, jobId)).status === 'succeeded', 90_000);

      // None of the killed start-ups got ready; each death scheduled the next start, the delays doubling.
      const exits = s.lines().filter((l) => l.event === 'file_process_exited');
      expect(exits.map((l) => l.pid)).toEqual([...seen].slice(0, 4));
      for (const l of exits.slice(1)) expect(l).toMatchObject({ ready: false, signal: 'SIGKILL' });
      expect(exits[0]).toMatchObject({ ready: true, signal: 'SIGKILL' });
      expect(exits.map((l) => l.restart_in_ms)).toEqual([50, 100, 200, 400]);
      expect(s.lines().filter((l) => l.event === 'file_process_restarted').map((l) => l.pid)).toEqual([back]);

      // Killed once more when ready: back again (the backoff goes on doubling: it was not up for a minute).
      process.kill(back, 'SIGKILL');
      const again = await nextChild(s, seen, 30_000);
      await eventually(() => s.lines().some((l) => l.event === 'file_process_restarted' && l.pid === again), 60_000);
      expect(s.lines().filter((l) => l.event === 'file_process_exited').at(-1)).toMatchObject({ pid: back, ready: true, restart_in_ms: 800 });
      await eventually(async () => (await readyz(s)) === 200, 15_000);
      expect((await denoise(s, fixture('speech-noisy-16k-mono.wav'))).status).toBe(200);
      expect(childPids(s.child.pid!)).toEqual([again]);

      // SIGTERM still stops both.
      s.child.kill('SIGTERM');
      expect(await s.exited).toBe(0);
      expect(killedAtSpawn).toHaveLength(2);
    } finally {
      await stop(s);
    }
  }, 240_000);
});
