// The 48 <-> 16 kHz resamplers (polyphase FFT convolution) against the textbook direct form of the same filter:
// equal to float32 rounding, in one pass and in random chunks (the FFT and the direct paths both run then).
import { Decimator3, designLowpass, Interpolator3 } from '../../src/dsp/resample';
import { seededRandom, speechSourcePath } from '../../src/audio/synthetic-noise';
import { decodeAudio } from '../../scripts/lib/audio-io';

const TAPS = 241;
const h = designLowpass(TAPS, 7600 / 48000, 6);

/** y[m] = sum_k h[k] x[3m - k], x = 0 before the start (the original, per-output loop). */
function referenceDecimate(x: Float32Array): Float32Array {
  const count = Math.floor((x.length - 1) / 3) + 1;
  const y = new Float32Array(count);
  for (let m = 0; m < count; m++) {
    let acc = 0;
    for (let k = 0; k < TAPS; k++) {
      const i = 3 * m - k;
      if (i >= 0) acc += h[k] * x[i];
    }
    y[m] = acc;
  }
  return y;
}

/** y[3m + p] = sum_j 3 h[3j + p] x[m - j] (zero-stuffing by 3, then the low-pass). */
function referenceInterpolate(x: Float32Array): Float32Array {
  const y = new Float32Array(3 * x.length);
  for (let m = 0; m < x.length; m++) {
    for (let p = 0; p < 3; p++) {
      let acc = 0;
      for (let j = 0; 3 * j + p < TAPS; j++) if (m - j >= 0) acc += 3 * h[3 * j + p] * x[m - j];
      y[3 * m + p] = acc;
    }
  }
  return y;
}

function runChunked<T extends { process(x: Float32Array): Float32Array }>(r: T, x: Float32Array, sizes: () => number): Float32Array {
  const parts: Float32Array[] = [];
  for (let pos = 0; pos < x.length; ) {
    const n = Math.min(sizes(), x.length - pos);
    parts.push(r.process(x.subarray(pos, pos + n)));
    pos += n;
  }
  const out = new Float32Array(parts.reduce((s, p) => s + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Largest difference in float32 ulps of the reference value (differences below 1e-12 absolute count as 0). */
function maxUlps(a: Float32Array, ref: Float32Array): number {
  expect(a.length).toBe(ref.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - ref[i]);
    if (d < 1e-12) continue;
    const ulp = Math.max(Math.abs(ref[i]) * 2 ** -23, 2 ** -149);
    worst = Math.max(worst, d / ulp);
  }
  return worst;
}

describe('48 kHz <-> 16 kHz resamplers equal the direct form to float32 rounding', () => {
  // 3 s of real speech at 48 kHz plus a little noise, so every band has content.
  const speech = decodeAudio(speechSourcePath(), 48000)[0].slice(0, 3 * 48000);
  const r = seededRandom(7);
  const x48 = speech.map((v) => v + 0.01 * (r() * 2 - 1));
  const refDown = referenceDecimate(x48);
  const x16 = refDown;
  const refUp = referenceInterpolate(x16);

  it('in one pass (FFT blocks)', () => {
    expect(maxUlps(new Decimator3().process(x48), refDown)).toBeLessThanOrEqual(1);
    expect(maxUlps(new Interpolator3().process(x16), refUp)).toBeLessThanOrEqual(1);
  });

  it('in random chunks of 1-3000 samples (FFT blocks and direct sums)', () => {
    const rnd = seededRandom(11);
    const sizes = () => 1 + Math.floor(rnd() * 3000);
    expect(maxUlps(runChunked(new Decimator3(), x48, sizes), refDown)).toBeLessThanOrEqual(1);
    expect(maxUlps(runChunked(new Interpolator3(), x16, sizes), refUp)).toBeLessThanOrEqual(1);
    const small = () => 1 + Math.floor(rnd() * 40);
    expect(maxUlps(runChunked(new Decimator3(), x48.subarray(0, 20000), small), refDown.subarray(0, Math.floor(19999 / 3) + 1))).toBeLessThanOrEqual(1);
    expect(maxUlps(runChunked(new Interpolator3(), x16.subarray(0, 5000), small), refUp.subarray(0, 15000))).toBeLessThanOrEqual(1);
  });

  it('never produces NaN from the samples before the start', () => {
    const y = new Decimator3().process(new Float32Array(3000).fill(0.5));
    expect(y.every((v) => Number.isFinite(v))).toBe(true);
    const z = new Interpolator3().process(new Float32Array(3000).fill(0.5));
    expect(z.every((v) => Number.isFinite(v))).toBe(true);
  });
});

describe('ONNX Runtime leaves no empty debug log behind (issue 9, item 13)', () => {
  it('no <tmpdir>/mat-debug-<pid>.log once the engine has started', async () => {
    const { createInferenceEngine } = await import('../../src/inference/runtime/engine');
    const { loadConfig } = await import('../../src/config');
    const fs = await import('node:fs');
    const os = await import('node:os');
    const path = await import('node:path');
    const engine = await createInferenceEngine({ ...loadConfig(), workers: 1 });
    try {
      expect(fs.existsSync(path.join(os.tmpdir(), `mat-debug-${process.pid}.log`))).toBe(false);
    } finally {
      await engine.close();
    }
  });

  it("an empty one of a process that is gone (killed before it could remove its own) goes too; a live process's stays", async () => {
    const { removeOrtDebugLog } = await import('../../src/inference/runtime/sessions');
    const fs = await import('node:fs');
    const os = await import('node:os');
    const path = await import('node:path');
    const { spawnSync } = await import('node:child_process');
    // A pid that was just in use and has exited: a child that ran and was reaped.
    const gone = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
    const deadPid = Number(gone.stdout.trim());
    const dead = path.join(os.tmpdir(), `mat-debug-${deadPid}.log`);
    const alive = path.join(os.tmpdir(), `mat-debug-${process.ppid}.log`); // jest's parent: alive throughout
    const aliveExisted = fs.existsSync(alive);
    fs.writeFileSync(dead, '');
    if (!aliveExisted) fs.writeFileSync(alive, '');
    try {
      removeOrtDebugLog();
      expect(fs.existsSync(dead)).toBe(false);
      expect(fs.existsSync(alive)).toBe(true);
    } finally {
      fs.rmSync(dead, { force: true });
      if (!aliveExisted) fs.rmSync(alive, { force: true });
    }
  });
});
