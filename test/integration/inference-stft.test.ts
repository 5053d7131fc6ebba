// DTLN's STFT back ends (src/dsp/stft.ts): the WebAssembly SIMD kernels (src/dsp/wasm/dtln-dsp.ts, built by
// `npm run build`) against RealFFT and the plain JS loops, bit for bit; and DtlnCore on either back end with the real
// ONNX graphs gives bit-identical audio, whatever the chunking.
import fs from 'node:fs';
import { loadConfig } from '../../src/config';
import { RealFFT } from '../../src/dsp/fft';
import { DtlnCore, type DtlnGraphs } from '../../src/inference/models/dtln';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { createStft, STFT_BINS, STFT_BLOCK, WASM_FILE, wasmStftProblem } from '../../src/dsp/stft';
import { seededRandom, speechSourcePath } from '../../src/audio/synthetic-noise';
import { decodeAudio } from '../../scripts/lib/audio-io';

/** Index of the first element whose bits differ (-1: none); NaN never occurs here. */
function firstDifference(a: Float32Array | Float64Array, b: Float32Array | Float64Array, n = a.length): number {
  for (let i = 0; i < n; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

let speechCache: Float32Array | null = null;
function signal(n: number, seed: number): Float32Array {
  const r = seededRandom(seed);
  const speech = (speechCache ??= decodeAudio(speechSourcePath(), 16000)[0]);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = speech[(i + seed * 977) % speech.length] + 0.05 * (r() * 2 - 1);
  // A few extreme values: large, tiny, exact zeros.
  x[3] = 1;
  x[700] = -1;
  x[701] = 1e-30;
  x.fill(0, 1000, 1400);
  return x;
}

describe('STFT back ends', () => {
  it('the WebAssembly kernels are built and load', () => {
    expect(fs.existsSync(WASM_FILE)).toBe(true);
    expect(wasmStftProblem()).toBeNull();
    expect(createStft().kind).toBe('wasm');
    expect(createStft('js').kind).toBe('js');
  });

  // Hop 128 is DTLN's; 256 is nsm-1's stage 1 (dtln-stage1.ts), whose frames overlap by half.
  it.each([
    [1, 128], [2, 128], [7, 128], [64, 128], [125, 128],
    [1, 256], [2, 256], [7, 256], [64, 256],
  ])('WebAssembly STFT, masked inverse and overlap-add equal RealFFT and the JS loops bit for bit (%i frames every %i samples, 3 streams)', (t, hop) => {
    const B = 3;
    const wasm = createStft('wasm');
    const js = createStft('js');
    const fft = new RealFFT(STFT_BLOCK);
    const w = wasm.prepare(B, t, hop);
    const j = js.prepare(B, t, hop);
    const len = t * hop + STFT_BLOCK - hop;
    const r = seededRandom(t + hop);
    for (let b = 0; b < B; b++) {
      const x = signal(len, 10 * t + b + hop);
      w.sig[b].set(x);
      j.sig[b].set(x);
      wasm.stft(b);
      js.stft(b);
      // And RealFFT called directly, frame by frame.
      const re = new Float64Array(STFT_BINS);
      const im = new Float64Array(STFT_BINS);
      const mag = new Float32Array(STFT_BINS);
      for (let i = 0; i < t; i++) {
        fft.forwardMag(x, i * hop, re, im, mag, 0);
        const row = (b * t + i) * STFT_BINS;
        expect(firstDifference(w.re.subarray(row, row + STFT_BINS), re)).toBe(-1);
        expect(firstDifference(w.im.subarray(row, row + STFT_BINS), im)).toBe(-1);
        expect(firstDifference(w.mag.subarray(row, row + STFT_BINS), mag)).toBe(-1);
      }
    }
    const rows = B * t * STFT_BINS;
    expect(firstDifference(w.re, j.re, rows)).toBe(-1);
    expect(firstDifference(w.mag, j.mag, rows)).toBe(-1);
    // Masks as a sigmoid gives them, with exact 0 and 1 too.
    for (let i = 0; i < rows; i++) {
      const g = i % 97 === 0 ? 0 : i % 89 === 0 ? 1 : Math.fround(r());
      w.mask[i] = g;
      j.mask[i] = g;
    }
    wasm.istftMasked();
    js.istftMasked();
    expect(firstDifference(w.blocks, j.blocks, B * t * STFT_BLOCK)).toBe(-1);
    const block = new Float32Array(STFT_BLOCK);
    fft.inverseMasked(j.re, j.im, j.mask, STFT_BINS, block, 0);
    expect(firstDifference(w.blocks.subarray(STFT_BLOCK, 2 * STFT_BLOCK), block)).toBe(-1);
    // Overlap-add onto a non-zero accumulator, plain and windowed (nsm-1's Hann synthesis).
    const hann = new Float32Array(STFT_BLOCK);
    for (let i = 0; i < STFT_BLOCK; i++) hann[i] = 0.25 * (1 - Math.cos((2 * Math.PI * i) / STFT_BLOCK));
    for (const win of [null, hann]) {
      for (let b = 0; b < B; b++) {
        const start = signal(len, 99 + b);
        w.acc[b].set(start);
        j.acc[b].set(start);
        wasm.overlapAdd(b, win);
        js.overlapAdd(b, win);
        expect(firstDifference(w.acc[b], j.acc[b], len)).toBe(-1);
      }
    }
  });

  describe('DtlnCore', () => {
    let graphs: DtlnGraphs;
    beforeAll(async () => {
      graphs = await loadGraphs(loadConfig().modelsDir);
    });

    async function run(core: DtlnCore, x: Float32Array[], sizes: number[]): Promise<{ out: Float32Array[] }> {
      const out: Float32Array[][] = x.map(() => []);
      for (let pos = 0, i = 0; pos < x[0].length; i++) {
        const n = Math.min(sizes[i % sizes.length], x[0].length - pos);
        const r = await core.process(x.map((ch) => ch.slice(pos, pos + n)));
        r.out.forEach((o, c) => out[c].push(o));
        pos += n;
      }
      const join = (parts: Float32Array[]): Float32Array => {
        const all = new Float32Array(parts.reduce((s, p) => s + p.length, 0));
        let o = 0;
        for (const p of parts) {
          all.set(p, o);
          o += p.length;
        }
        return all;
      };
      return { out: out.map(join) };
    }

    it.each([
      ['stage 1 only (nsm-1)', false],
      ['both stages (nsm-2)', true],
    ])('%s: WebAssembly and JS back ends give bit-identical output, one pass or chunked', async (_name, useStage2) => {
      const x = [signal(16000 * 6, 1), signal(16000 * 6, 2)];
      const wasm = await run(new DtlnCore(graphs, { batch: 2, useStage2, stft: 'wasm' }), x, [x[0].length]);
      const js = await run(new DtlnCore(graphs, { batch: 2, useStage2, stft: 'js' }), x, [16000, 333, 1, 4096]);
      const chunked = await run(new DtlnCore(graphs, { batch: 2, useStage2, stft: 'wasm' }), x, [7000, 128, 129, 50000]);
      for (let c = 0; c < 2; c++) {
        expect(wasm.out[c].length).toBeGreaterThan(16000 * 5);
        expect(js.out[c].length).toBe(wasm.out[c].length);
        expect(firstDifference(wasm.out[c], js.out[c])).toBe(-1);
        expect(firstDifference(chunked.out[c], js.out[c])).toBe(-1);
      }
      // Not trivially equal: the output is audio, not silence.
      let e = 0;
      for (const v of wasm.out[0]) e += v * v;
      expect(e).toBeGreaterThan(1);
    });
  });
});
