// The delay an echo reference adds to a live stream (issue 36: at most 10 ms over the same model without one), on
// LiveChainStream (the worker's side of a stream) driven on this thread. Declared: ready's latency_samples with the
// reference less without, every model at every rate class. Real: the output never lags the input by more than it
// declares, and within a frame and a hop of it; and what comes out lines up with the stream without a reference to
// the sample (a near end with no echo in it, the reference playing something else: the canceller is active, and the
// output's cross-correlation with the plain stream's output peaks at lag 0), so the declaration cannot hide a shift.
import { loadConfig } from '../../src/config';
import { Decimator2 } from '../../src/dsp/halfband';
import type { DtlnGraphs } from '../../src/inference/models/dtln';
import type { ModelId } from '../../src/inference/types';
import { echoScene } from '../helpers/echo-helpers';

const MODELS: ModelId[] = ['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4', 'nsm-2-hd'];
const RATES = [8000, 16000, 24000, 32000, 44100, 48000];

let graphs: DtlnGraphs;
beforeAll(async () => {
  const { loadGraphs } = await import('../../src/inference/runtime/sessions');
  graphs = await loadGraphs(loadConfig().modelsDir);
});

async function liveStream(model: ModelId, sampleRate: number, echo: boolean) {
  const { LiveChainStream } = await import('../../src/inference/live/chain-stream');
  const channels = echo ? 2 : 1;
  return new LiveChainStream({ streamId: 1, model, channels, sampleRate, encoding: 'pcm_f32le', attenuationLimitDb: 0, echoReference: echo }, graphs);
}

/** Streams the channels in 20 ms frames; returns the output and the largest lag of output behind input after 0.4 s. */
async function drive(model: ModelId, rate: number, channels: Float32Array[]): Promise<{ out: Float32Array; maxLag: number; latency: number }> {
  const s = await liveStream(model, rate, channels.length === 2);
  const n = channels[0].length;
  const frame = Math.round(rate / 50);
  const out = new Float32Array(n);
  let got = 0;
  let maxLag = 0;
  for (let pos = 0; pos + frame <= n; pos += frame) {
    const bytes = new Float32Array(frame * channels.length);
    for (let i = 0; i < frame; i++) for (let c = 0; c < channels.length; c++) bytes[i * channels.length + c] = channels[c][pos + i];
    const y = new Float32Array((await s.push(new Uint8Array(bytes.buffer))).slice().buffer);
    out.set(y, got);
    got += y.length;
    if (pos >= 0.4 * rate) maxLag = Math.max(maxLag, pos + frame - got);
  }
  return { out: out.subarray(0, got), maxLag, latency: s.latencySamples };
}

/** The lag in [-maxLag, maxLag] at which sum a[i] b[i - lag] is largest. */
function bestLag(a: Float32Array, b: Float32Array, maxLag: number): number {
  let best = 0;
  let bestSum = -Infinity;
  const n = Math.min(a.length, b.length);
  for (let lag = -maxLag; lag <= maxLag; lag++) {
    let sum = 0;
    const end = Math.min(n, n + lag);
    for (let i = Math.max(0, lag); i < end; i++) sum += a[i] * b[i - lag];
    if (sum > bestSum) [best, bestSum] = [lag, sum];
  }
  return best;
}

describe('the delay an echo reference adds to a live stream', () => {
  test('declared: at most 10 ms over the same model without a reference, every model at every rate', async () => {
    const added: string[] = [];
    for (const model of MODELS) {
      for (const rate of RATES) {
        const extra = (await liveStream(model, rate, true)).latencySamples - (await liveStream(model, rate, false)).latencySamples;
        added.push(`${model}@${rate}: ${((extra * 1000) / rate).toFixed(2)} ms`);
        expect([model, rate, extra > 0 && extra <= 0.01 * rate]).toEqual([model, rate, true]);
      }
    }
    expect(added.length).toBe(MODELS.length * RATES.length);
  });

  // The chain rates (8 kHz narrow band, 16 kHz, 48 kHz full band; the other rates run these behind resamplers), with
  // nsm-1 (hops of 256) and nsm-2 (hops of 128).
  test.each([
    ['nsm-1', 8000], ['nsm-2', 8000], ['nsm-1', 16000], ['nsm-2', 16000], ['nsm-1', 48000], ['nsm-2', 48000], ['nsm-2', 44100],
  ] as Array<[ModelId, number]>)('real: %s at %i Hz lags no more than it declares and lines up with the plain stream', async (model, rate) => {
    const scene = await echoScene({ rate: rate <= 16000 ? 16000 : 48000, seconds: 2, nearFrom: 0 });
    // The near end and a little noise only (no echo of the reference in it): the output should be the plain one's.
    let mic: Float32Array = scene.mic.map((v, i) => v - scene.echo[i]);
    let ref: Float32Array = scene.ref;
    if (rate === 8000) {
      [mic, ref] = [new Decimator2().process(mic), new Decimator2().process(ref)];
    } else if (rate === 44100) {
      // Nearest-sample rate change: a test signal only (both runs get the same one).
      const at = (x: Float32Array): Float32Array => Float32Array.from({ length: Math.floor((x.length * 441) / 480) }, (_, i) => x[Math.round((i * 480) / 441)] ?? 0);
      [mic, ref] = [at(mic), at(ref)];
    }
    const plain = await drive(model, rate, [mic]);
    const echo = await drive(model, rate, [mic, ref]);
    for (const r of [plain, echo]) {
      expect(r.maxLag).toBeLessThanOrEqual(r.latency);
      const hop = (model === 'nsm-1' ? 256 : 128) * Math.max(1, rate / 16000);
      expect(r.maxLag).toBeGreaterThan(r.latency - rate / 50 - hop);
    }
    expect(echo.latency - plain.latency).toBeLessThanOrEqual(0.01 * rate);
    // Over the last second, 12 ms either way: a shift by the canceller's hop (8 ms), or any part of it, would show.
    const n = Math.min(plain.out.length, echo.out.length);
    expect(bestLag(echo.out.subarray(n - rate, n), plain.out.subarray(n - rate, n), Math.round(0.012 * rate))).toBe(0);
  }, 60_000);
});
