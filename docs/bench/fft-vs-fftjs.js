// Side-by-side measurement behind docs/ARCHITECTURE.md, "Libraries and hand-written code": a 512-point real FFT,
// forward + inverse per frame, by our RealFFT (src/dsp/fft.ts), our WebAssembly SIMD row FFT (src/dsp/fft-pairs.ts,
// 64 frames per call) and the npm package fft.js (not a dependency; installed aside). Run from the repository root:
//
//   npm run build && npm install --prefix /tmp/fftjs fft.js@4.0.4
//   NODE_PATH=/tmp/fftjs/node_modules node docs/bench/fft-vs-fftjs.js
'use strict';
const path = require('node:path');
const { RealFFT } = require(path.resolve('dist/src/dsp/fft.js'));
const { createRowFft } = require(path.resolve('dist/src/dsp/fft-pairs.js'));
const FFT = require('fft.js');

const N = 512;
const ROWS = 64;
const REPS = 300;
const ROUNDS = 15;
const frames = Array.from({ length: ROWS }, () => Float64Array.from({ length: N }, () => Math.random() * 2 - 1));
const ours = new RealFFT(N);
const re = new Float64Array(N / 2 + 1);
const im = new Float64Array(N / 2 + 1);
const back = new Float64Array(N);
const lib = new FFT(N);
const spec = lib.createComplexArray();
const libOut = lib.createComplexArray();
const rows = createRowFft(N, 'wasm');
rows.reserve(ROWS);

// fft.js has a real-input forward transform but no real inverse: its inverse is the complex one on the full spectrum.
const run = {
  'RealFFT (JS)': () => {
    for (const f of frames) {
      ours.forward(f, 0, re, im);
      ours.inverse(re, im, 0, back, 0);
    }
  },
  'RealFFT rows (WebAssembly SIMD)': () => {
    for (let r = 0; r < ROWS; r++) rows.sig.set(frames[r], r * N);
    rows.forward(ROWS);
    rows.inverse(ROWS);
  },
  'fft.js': () => {
    for (const f of frames) {
      lib.realTransform(spec, f);
      lib.completeSpectrum(spec);
      lib.inverseTransform(libOut, spec);
    }
  },
  'RealFFT forward only': () => {
    for (const f of frames) ours.forward(f, 0, re, im);
  },
  'fft.js realTransform only': () => {
    for (const f of frames) lib.realTransform(spec, f);
  },
};

// The same transform: spectra and round trip agree to float64 rounding.
ours.forward(frames[0], 0, re, im);
lib.realTransform(spec, frames[0]);
lib.completeSpectrum(spec);
lib.inverseTransform(libOut, spec);
let diff = 0;
for (let k = 0; k <= N / 2; k++) diff = Math.max(diff, Math.abs(spec[2 * k] - re[k]), Math.abs(spec[2 * k + 1] - im[k]));
let trip = 0;
for (let i = 0; i < N; i++) trip = Math.max(trip, Math.abs(libOut[2 * i] - frames[0][i]));
console.log(`row FFT: ${rows.kind}; max |fft.js - RealFFT| ${diff.toExponential(1)}; fft.js round-trip error ${trip.toExponential(1)}`);

// Rounds interleave the candidates, so a busy phase of the machine hits all of them; ratios are taken per round.
const times = Object.fromEntries(Object.keys(run).map((k) => [k, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, fn] of Object.entries(run)) {
    fn(); // warm
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < REPS; i++) fn();
    times[name].push(Number(process.hrtime.bigint() - t0) / 1e3 / (REPS * ROWS));
  }
}
const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
for (const [name, t] of Object.entries(times)) {
  console.log(`${name.padEnd(32)} ${median(t).toFixed(2)} µs per frame (median of ${ROUNDS}; min ${Math.min(...t).toFixed(2)})`);
}
const ratio = (a, b) => median(times[a].map((t, i) => t / times[b][i])).toFixed(2);
console.log(`per-round ratios (median): fft.js / RealFFT ${ratio('fft.js', 'RealFFT (JS)')}, ` +
  `RealFFT / WebAssembly ${ratio('RealFFT (JS)', 'RealFFT rows (WebAssembly SIMD)')}, ` +
  `forward only fft.js / RealFFT ${ratio('fft.js realTransform only', 'RealFFT forward only')}`);
