// Silero VAD as the service runs it (src/vad/silero.ts on models/silero_vad.onnx, converted by scripts/vad/silero.ts):
// the same probabilities as the package's own graph run frame by frame the way its reference code does (64 samples of
// context, state carried), whatever the chunking, and the same for a stream alone or batched with others.
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import * as ort from 'onnxruntime-node';
import { loadConfig } from '../../src/config';
import { loadVadSession, VadStream } from '../../src/vad/silero';
import { VAD_CONTEXT, VAD_FILE, VAD_FRAME } from '../../src/vad/silero-graph';
import { seededRandom, speechSourcePath } from '../../src/audio/synthetic-noise';
import { decodeAudio } from '../../scripts/lib/audio-io';
import { SHIPPED_SILERO, sileroSource } from '../../scripts/vad/silero';

const config = loadConfig();

/** 6 s of speech with noise at about 5 dB SNR, then 1 s of noise alone. */
function noisySpeech(): Float32Array {
  const speech = decodeAudio(speechSourcePath(), 16000)[0].subarray(16000, 16000 * 7);
  const r = seededRandom(7);
  const x = new Float32Array(16000 * 7);
  for (let i = 0; i < x.length; i++) x[i] = (i < speech.length ? speech[i] : 0) + 0.03 * (r() * 2 - 1);
  return x;
}

async function reference(x: Float32Array): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(sileroSource(SHIPPED_SILERO).path, { intraOpNumThreads: 1 });
  const frames = Math.floor(x.length / VAD_FRAME);
  const out = new Float32Array(frames);
  let state = new Float32Array(2 * 128);
  const input = new Float32Array(VAD_CONTEXT + VAD_FRAME);
  const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), []);
  for (let t = 0; t < frames; t++) {
    input.copyWithin(0, VAD_FRAME); // the previous frame's last 64 samples (zeros at first)
    input.set(x.subarray(t * VAD_FRAME, (t + 1) * VAD_FRAME), VAD_CONTEXT);
    const r = await session.run({ input: new ort.Tensor('float32', input.slice(), [1, input.length]), state: new ort.Tensor('float32', state, [2, 1, 128]), sr });
    out[t] = (r.output.data as Float32Array)[0];
    state = (r.stateN.data as Float32Array).slice();
  }
  return out;
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

describe('Silero VAD sequence graph', () => {
  let session: ort.InferenceSession;
  const x = noisySpeech();
  beforeAll(async () => {
    session = await loadVadSession(config.modelsDir);
  });

  test('models/manifest.json names the graph, its source package and its sha256', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(config.modelsDir, 'manifest.json'), 'utf8'));
    const bytes = fs.readFileSync(path.join(config.modelsDir, VAD_FILE));
    expect(manifest.graphs).toContainEqual({ file: VAD_FILE, sha256: createHash('sha256').update(bytes).digest('hex'), bytes: bytes.length });
    expect(manifest.vad).toMatchObject({ file: VAD_FILE, source: { package: sileroSource(SHIPPED_SILERO).package } });
  });

  test('equals the package graph run frame by frame (speech and noise both present)', async () => {
    const ref = await reference(x);
    const got = await new VadStream(session).push(x);
    expect(got.length).toBe(ref.length);
    expect(maxDiff(got, ref)).toBeLessThan(1e-5);
    // The clip has both classes, so the comparison covers both ends of the scale.
    expect(Math.max(...ref)).toBeGreaterThan(0.9);
    expect(Math.min(...ref.subarray(ref.length - 25))).toBeLessThan(0.1);
  });

  test('any chunking gives the probabilities of one pass; the last partial frame is zero-padded by flush()', async () => {
    const whole = new VadStream(session);
    const one = [...(await whole.push(x)), ...(await whole.flush())];
    const chunked = new VadStream(session);
    const got: number[] = [];
    const sizes = [1, 511, 512, 513, 37, 8000, 3];
    for (let i = 0, k = 0; i < x.length; k++) {
      const n = sizes[k % sizes.length];
      got.push(...(await chunked.push(x.subarray(i, i + n))));
      i += n;
    }
    got.push(...(await chunked.flush()));
    expect(got.length).toBe(Math.ceil(x.length / VAD_FRAME));
    expect(got).toEqual(one);
  });

  test('streams batched in one run (different lengths) get exactly what each gets alone', async () => {
    const lengths = [x.length, 40000, 512 * 3, 0];
    const alone = await Promise.all(lengths.map((n) => new VadStream(session).push(x.subarray(0, n))));
    const streams = lengths.map(() => new VadStream(session));
    const joint = await VadStream.runJoint(streams.map((s, i) => ({ stream: s, windows: s.windowsFor(x.subarray(0, lengths[i])) })));
    joint.forEach((p, i) => expect(Array.from(p)).toEqual(Array.from(alone[i])));
    // State carried: the batched streams go on as the lone ones do.
    const tail = x.subarray(0, 4096);
    const next = await Promise.all(streams.slice(0, 2).map((s) => s.push(tail)));
    const lone = [new VadStream(session), new VadStream(session)];
    await lone[0].push(x);
    await lone[1].push(x.subarray(0, 40000));
    expect(Array.from(next[0])).toEqual(Array.from(await lone[0].push(tail)));
    expect(Array.from(next[1])).toEqual(Array.from(await lone[1].push(tail)));
  });
});
