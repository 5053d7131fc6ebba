// AssemblyScript (compiled to WebAssembly by `npm run build`, not by tsc): the per-bin and per-sample passes of one
// echo-canceller channel hop (src/dsp/aec/hop-passes.ts has the same passes in JavaScript and says what each does).
// Scalar float64, every operation the JavaScript's in the same order (float32 values widened where it reads a
// Float32Array, rounded where it stores one; sums in sample order; no fused multiply-add in WebAssembly), so the
// results are bit-identical to it. It runs on the memory of the thread's canceller heap (src/dsp/aec/heap.ts),
// which holds the row FFT's rows and every canceller's arena, so it reads and writes the FFT rows in place. All addresses in bytes.

@inline function f64At(p: usize, i: i32): f64 {
  return load<f64>(p + (<usize>i << 3));
}
@inline function f32At(p: usize, i: i32): f64 {
  return <f64>load<f32>(p + (<usize>i << 2));
}
@inline function setF64(p: usize, i: i32, v: f64): void {
  store<f64>(p + (<usize>i << 3), v);
}
@inline function setF32(p: usize, i: i32, v: f64): void {
  store<f32>(p + (<usize>i << 2), <f32>v);
}

/**
 * Ŷ (float32) into spectrum row 0, |Ŷ|² / 2 into yPow; with `shadow`, the shadow's Ŷ into row 1. Rows of K bins, the
 * first n of them written (n < K: the canceller's band is limited, options.ts `bins`).
 */
export function echoRows(K: i32, n: i32, yRe: usize, yIm: usize, sRe: usize, sIm: usize, shadow: i32, re: usize, im: usize, yPow: usize): void {
  for (let k = 0; k < n; k++) {
    const a = f32At(yRe, k);
    const b = f32At(yIm, k);
    setF64(re, k, a);
    setF64(im, k, b);
    setF64(yPow, k, 0.5 * (a * a + b * b));
  }
  // Above the band the rows are 0 (the filters have nothing there).
  for (let k = n; k < K; k++) {
    setF64(re, k, 0);
    setF64(im, k, 0);
  }
  if (shadow == 0) return;
  for (let k = 0; k < n; k++) {
    setF64(re, K + k, f32At(sRe, k));
    setF64(im, K + k, f32At(sIm, k));
  }
  for (let k = n; k < K; k++) {
    setF64(re, K + k, 0);
    setF64(im, K + k, 0);
  }
}

/**
 * The errors e = d − ŷ (and the shadow's) from the inverse rows in sig, their energies into res[0..2] (main error,
 * echo estimate, shadow error), and the forward rows: row 0 the windowed [ePrev, e], row 1 [0, e] (mode ≥ 1), row 2
 * [0, e_shadow] (mode 2); ePrev ← e.
 */
export function errorRows(R: i32, sig: usize, d: usize, ePrev: usize, win: usize, mode: i32, res: usize): void {
  const M = 2 * R;
  let errMain: f64 = 0;
  let echoEnergy: f64 = 0;
  let errShadow: f64 = 0;
  for (let i = 0; i < R; i++) {
    const y = f64At(sig, R + i);
    const di = f32At(d, i);
    const v = di - y;
    errMain += v * v;
    echoEnergy += y * y;
    if (mode == 2) {
      const u = di - f64At(sig, M + R + i);
      errShadow += u * u;
      setF64(sig, 2 * M + i, 0);
      setF64(sig, 2 * M + R + i, u);
    }
    setF64(sig, i, f64At(ePrev, i) * f64At(win, i));
    setF64(sig, R + i, v * f64At(win, R + i));
    setF64(ePrev, i, v);
    if (mode >= 1) {
      setF64(sig, M + i, 0);
      setF64(sig, M + R + i, v);
    }
  }
  setF64(res, 0, errMain);
  setF64(res, 1, echoEnergy);
  setF64(res, 2, errShadow);
}

/**
 * Row 0's spectrum into aRe/aIm and its power into ePow; with `far`, row 1 (the main filter's E) into mRe/mIm
 * (float32) and Ψ_S updated from it and Φ, and with `shadow` row 2 into sRe/sIm. Rows of K bins; row 0 whole, rows
 * 1 and 2 over the first n bins (the filters' band).
 */
export function spectra(K: i32, n: i32, re: usize, im: usize, aRe: usize, aIm: usize, ePow: usize, far: i32, phi: usize, psi: usize, mRe: usize, mIm: usize, shadow: i32, sRe: usize, sIm: usize): void {
  for (let k = 0; k < K; k++) {
    const r0 = f64At(re, k);
    const i0 = f64At(im, k);
    setF64(aRe, k, r0);
    setF64(aIm, k, i0);
    setF64(ePow, k, r0 * r0 + i0 * i0);
  }
  if (far == 0) return;
  for (let k = 0; k < n; k++) {
    const r1 = f64At(re, K + k);
    const i1 = f64At(im, K + k);
    setF32(mRe, k, r1);
    setF32(mIm, k, i1);
    const pe = r1 * r1 + i1 * i1;
    const inst = Math.max(pe - f32At(phi, k), 1e-3 * pe);
    const p = f64At(psi, k);
    setF64(psi, k, inst > p ? inst : 0.9 * p + 0.1 * inst);
  }
  if (shadow == 0) return;
  for (let k = 0; k < n; k++) {
    setF32(sRe, k, f64At(re, 2 * K + k));
    setF32(sIm, k, f64At(im, 2 * K + k));
  }
}

/** The suppressor's gains on row 0: re/im[k] = a[k] g[k]. */
export function applyGains(K: i32, aRe: usize, aIm: usize, g: usize, re: usize, im: usize): void {
  for (let k = 0; k < K; k++) {
    const gk = f64At(g, k);
    setF64(re, k, f64At(aRe, k) * gk);
    setF64(im, k, f64At(aIm, k) * gk);
  }
}

/** Overlap-add of the inverse row 0 into the output block (float32), the next overlap kept; micPrev ← d. */
export function overlapAdd(R: i32, sig: usize, win: usize, ola: usize, d: usize, micPrev: usize, out: usize): void {
  for (let i = 0; i < R; i++) {
    setF32(out, i, f64At(ola, i) + f64At(sig, i) * f64At(win, i));
    setF64(ola, i, f64At(sig, R + i) * f64At(win, R + i));
    setF64(micPrev, i, f32At(d, i));
  }
}

/** out[k] = a[k] b[k]. */
export function mulInto(K: i32, a: usize, b: usize, out: usize): void {
  for (let k = 0; k < K; k++) setF64(out, k, f64At(a, k) * f64At(b, k));
}

/**
 * EchoSuppressor.compute's two loops after its first call (suppressor.ts has the meaning): the residual echo estimate
 * per bin, the noise floor's tracking and the echo dominance over bins 4..99, then the gains into g. The term weights
 * w* are 0 or 1 (the ablation mask).
 */
export function suppress(
  K: i32, ePow: usize, yPow: usize, phi: usize, beta: usize, tailIn: usize, tailDecay: usize, nl: usize,
  g: usize, prevClean: usize, noise: usize, smoothPow: usize, tail: usize, resid: usize, par: usize,
): void {
  // The scalars come through memory (par: wPhi, wLeak, wTail, wNl, over, rise, overdrive, dd, floor, binOd and its two
  // bounds, suppressor.ts OD_HI / OD_LO): V8 called
  // the function with them as arguments through a generic JS-to-WebAssembly wrapper, ~3 % of the canceller's time.
  const wPhi = f64At(par, 0);
  const wLeak = f64At(par, 1);
  const wTail = f64At(par, 2);
  const wNl = f64At(par, 3);
  const over = f64At(par, 4);
  const rise = f64At(par, 5);
  const overdrive = f64At(par, 6);
  const dd = f64At(par, 7);
  const floor = f64At(par, 8);
  const binOd = f64At(par, 9);
  const odHi = f64At(par, 10);
  const odLo = f64At(par, 11);
  let eSum: f64 = 0;
  let rSum: f64 = 0;
  let prevLeak = f64At(beta, 0) * f64At(yPow, 0);
  let curLeak = prevLeak;
  for (let k = 0; k < K; k++) {
    const tk = f64At(tailDecay, k) * (f64At(tail, k) + f64At(tailIn, k));
    setF64(tail, k, tk);
    const nextLeak = k + 1 < K ? f64At(beta, k + 1) * f64At(yPow, k + 1) : curLeak;
    let leak = curLeak > prevLeak ? curLeak : prevLeak;
    if (nextLeak > leak) leak = nextLeak;
    prevLeak = curLeak;
    curLeak = nextLeak;
    let r = wPhi * f32At(phi, k);
    if (wLeak * leak > r) r = wLeak * leak;
    if (wTail * tk > r) r = wTail * tk;
    const nk = f64At(nl, k);
    if (wNl * nk > r) r = wNl * nk;
    r *= over;
    setF64(resid, k, r);
    const e = f64At(ePow, k);
    const spk = 0.7 * f64At(smoothPow, k) + 0.3 * e;
    setF64(smoothPow, k, spk);
    const nz = f64At(noise, k);
    if (spk < nz) setF64(noise, k, spk);
    else if (r < nz) setF64(noise, k, nz * rise);
    if (k >= 4 && k < 100) {
      eSum += e;
      rSum += r;
    }
  }
  const dom = eSum / (rSum + 1e-20);
  const od = 1 + (overdrive - 1) * Math.min(1, Math.max(0, (6 - dom) / 4));
  for (let k = 0; k < K; k++) {
    const e = f64At(ePow, k);
    let odk = od;
    if (binOd != 0) odk = 1 + (od - 1) * Math.min(1, Math.max(0, (odHi - e / (f64At(resid, k) + 1e-20)) / (odHi - odLo)));
    const inv = 1 / (odk * f64At(resid, k) + 1e-20);
    const post = e * inv;
    const prior = dd * f64At(prevClean, k) * inv + (1 - dd) * (post > 1 ? post - 1 : 0);
    let gk = prior / (1 + prior);
    const nz = f64At(noise, k);
    if (gk * gk * e < nz) gk = Math.sqrt(nz / (e + 1e-20));
    if (gk < floor) gk = floor;
    if (gk > 1) gk = 1;
    setF64(g, k, gk);
    setF64(prevClean, k, gk * gk * e);
  }
}
