// Row FFTs for the full-band stages (src/dsp/fft-pairs.ts): the WebAssembly SIMD kernel (wasm/fft-pairs.ts,
// built by `npm run build`) against RealFFT called frame by frame, bit for bit, for every size the kernel takes, odd
// and even row counts and row offsets. (The stages on top of it are held to their own references in
// inference-dsp.test.ts and the chain tests; that their output did not change is in docs/engine.md.)
import fs from 'node:fs';
import { RealFFT } from '../../src/dsp/fft';
import { createRowFft, FFT_PAIRS_WASM, rowFftWasmProblem, sharedRowFft } from '../../src/dsp/fft-pairs';
import { seededRandom } from '../../src/audio/synthetic-noise';

function firstDifference(a: Float64Array, b: Float64Array): number {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

describe('row FFTs (fft-pairs)', () => {
  it('the WebAssembly kernel is built and loads', () => {
    expect(fs.existsSync(FFT_PAIRS_WASM)).toBe(true);
    expect(rowFftWasmProblem()).toBeNull();
    expect(createRowFft(1024).kind).toBe('wasm');
    expect(createRowFft(1024, 'js').kind).toBe('js');
    expect(sharedRowFft(512)).toBe(sharedRowFft(512));
    expect(() => createRowFft(1000)).toThrow(/power of two/);
    expect(() => createRowFft(8)).toThrow(/16 to 4096/);
  });

  it.each([16, 32, 64, 128, 256, 512, 1024, 2048, 4096])('size %i: forward and inverse equal RealFFT frame by frame, bit for bit', (n) => {
    const r = seededRandom(n);
    const fft = new RealFFT(n);
    const bins = n / 2 + 1;
    for (const [rows, first] of [[1, 0], [2, 0], [5, 0], [3, 2]] as const) {
      const w = createRowFft(n);
      w.reserve(first + rows);
      const input = Float64Array.from({ length: (first + rows) * n }, (_, i) => (i % 97 === 0 ? 0 : r() * 2 - 1));
      input[n + 1] = 1e-300; // a subnormal-range product somewhere
      w.sig.set(input);
      w.forward(rows, first);
      const re = new Float64Array((first + rows) * bins);
      const im = new Float64Array((first + rows) * bins);
      for (let k = first; k < first + rows; k++) fft.forward(input, k * n, re, im, k * bins);
      const span = (a: Float64Array, per: number) => a.slice(first * per, (first + rows) * per);
      expect(firstDifference(span(w.re, bins), span(re, bins))).toBe(-1);
      expect(firstDifference(span(w.im, bins), span(im, bins))).toBe(-1);

      // Inverse of other spectra (the imaginary parts of DC and Nyquist are ignored by both).
      for (let i = 0; i < re.length; i++) {
        re[i] = r() * 4 - 2;
        im[i] = r() * 4 - 2;
      }
      w.re.set(re);
      w.im.set(im);
      w.inverse(rows, first);
      const out = new Float64Array((first + rows) * n);
      for (let k = first; k < first + rows; k++) fft.inverse(re, im, k * bins, out, k * n);
      expect(firstDifference(span(w.sig, n), span(out, n))).toBe(-1);
    }
  });

  it.each([false, true])('windowRows and overlapAddRows equal the JS loops bit for bit (round to float32: %s)', (round32) => {
    const n = 512;
    const hop = 128;
    const rows = 7;
    const r = seededRandom(round32 ? 3 : 4);
    const src = Float32Array.from({ length: 40 + (rows - 1) * hop + n }, () => r() * 2 - 1);
    const window = Float64Array.from({ length: n }, (_, i) => Math.fround(Math.sqrt(0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n))));
    const wasm = createRowFft(n);
    const js = createRowFft(n, 'js');
    for (const f of [wasm, js]) {
      f.reserve(rows + 2);
      f.windowRows(src, 40, hop, rows, window, round32, 2);
    }
    expect(firstDifference(wasm.sig.slice(2 * n, (rows + 2) * n), js.sig.slice(2 * n, (rows + 2) * n))).toBe(-1);
    for (let i = 0; i < rows * n; i++) expect(js.sig[2 * n + i]).toBe(round32 ? Math.fround(src[40 + Math.floor(i / n) * hop + (i % n)] * window[i % n]) : src[40 + Math.floor(i / n) * hop + (i % n)] * window[i % n]);

    // Overlap-add of other rows into an accumulator that already holds something, at an offset.
    for (let i = 0; i < rows * n; i++) wasm.sig[i] = js.sig[i] = r() * 3 - 1.5;
    const accWasm = Float32Array.from({ length: 10 + (rows - 1) * hop + n + 5 }, () => r());
    const accJs = accWasm.slice();
    wasm.overlapAddRows(rows, hop, window, accWasm, 10, round32);
    js.overlapAddRows(rows, hop, window, accJs, 10, round32);
    expect(firstDifference(Float64Array.from(accWasm), Float64Array.from(accJs))).toBe(-1);
    expect(accWasm[0]).toBe(accJs[0]); // outside the span: untouched
  });

  it('rows past those reserved are refused; growing keeps the tables', () => {
    const w = createRowFft(256);
    w.reserve(2);
    expect(() => w.forward(3)).toThrow(/reserved/);
    expect(() => w.inverse(1, 2)).toThrow(/reserved/);
    w.reserve(300); // grows the WebAssembly memory
    const x = Float64Array.from({ length: 256 }, (_, i) => Math.sin(i * 0.3));
    w.sig.set(x, 299 * 256);
    w.forward(1, 299);
    const re = new Float64Array(129);
    const im = new Float64Array(129);
    new RealFFT(256).forward(x, 0, re, im, 0);
    expect(firstDifference(w.re.slice(299 * 129, 300 * 129), re)).toBe(-1);
    expect(firstDifference(w.im.slice(299 * 129, 300 * 129), im)).toBe(-1);
  });
});
