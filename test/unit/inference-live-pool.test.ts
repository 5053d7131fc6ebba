// The live pool's tick spacing (LIVE_TICK_MS): chunks that arrive while a worker's last tick started less than
// minTickMs ago wait for the next tick, so ticks carry more streams; at 0, ticks follow each other as soon as answered.
// A worker stand-in answers at once, so only the pool's own timing shows.
import { LivePool, type LiveWorker } from '../../src/inference/live/pool';
import type { FromWorker, ToWorker } from '../../src/inference/runtime/protocol';
import { packLive, unpackLive } from '../../src/inference/live/packing';

function echoWorker(starts: number[]): LiveWorker {
  return {
    usable: true,
    starting: false,
    ready: Promise.resolve(),
    liveStreams: 0,
    async postLive(msg: Extract<ToWorker, { type: 'live-open' | 'live-tick' }>): Promise<FromWorker> {
      if (msg.type === 'live-open') return { type: 'live-opened', reqId: msg.reqId, latencySamples: 0, chainRate: 16000 };
      starts.push(performance.now());
      return { type: 'live-result', reqId: msg.reqId, packed: packLive(unpackLive(msg.packed)) };
    },
    abortLive: () => undefined,
  };
}

/** 60 chunks of 64 bytes over three streams, one per timer turn; what the worker saw, and how long it took. */
async function run(minTickMs: number): Promise<{ starts: number[]; bytes: number; pushes: number; elapsedMs: number }> {
  const starts: number[] = [];
  const worker = echoWorker(starts);
  let id = 0;
  const pool = new LivePool(() => [worker], () => ++id, () => ++id, minTickMs);
  let bytes = 0;
  const streams = await Promise.all(
    [1, 2, 3].map(() => pool.open({ model: 'nsm-1', channels: 1, sampleRate: 16000, encoding: 'pcm_s16le', attenuationLimitDb: 0 }, { output: (b) => (bytes += b.byteLength), error: (e) => { throw e; } })),
  );
  // A fixed number of arrivals, not a fixed time: a loaded machine stretches the time, and the assertions scale with it.
  const pushes = 60;
  const t0 = performance.now();
  for (let k = 0; k < pushes; k++) {
    streams[k % 3].push(new Uint8Array(64));
    await new Promise((r) => setTimeout(r, 1));
  }
  const elapsedMs = performance.now() - t0;
  await Promise.all(streams.map((s) => s.end()));
  return { starts, bytes, pushes, elapsedMs };
}

describe('live pool tick spacing', () => {
  test('LIVE_TICK_MS 10: tick starts at least ~10 ms apart, every byte answered', async () => {
    const { starts, bytes, pushes, elapsedMs } = await run(10);
    const gaps = starts.slice(1).map((t, i) => t - starts[i]);
    // Node timers count from the loop's cached clock, in whole ms: one may fire up to ~1.5 ms early.
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(8);
    // At most one tick per 10 ms of the run (and the end's), however long the machine made it.
    expect(starts.length).toBeLessThanOrEqual(Math.ceil(elapsedMs / 10) + 3);
    expect(bytes).toBe(64 * pushes);
  });

  test('LIVE_TICK_MS 0: a tick per arrival turn (many more ticks)', async () => {
    const { starts, pushes } = await run(0);
    // Each arrival comes in a timer turn of its own (~1 ms apart) and is sent at once: about one tick per chunk (a
    // 10 ms spacing would give about a sixth of that on a quiet machine).
    expect(starts.length).toBeGreaterThanOrEqual(Math.floor(pushes / 2));
  });
});
