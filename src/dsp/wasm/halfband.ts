// AssemblyScript (compiled to WebAssembly by `npm run build`, not by tsc): the half-band pair's inner loops
// (src/dsp/halfband.ts: Interpolator2, Decimator2), two outputs per SIMD operation. Every lane does the JS loop's
// float64 operations in the same order (the float32 samples widened, each pair summed, times its tap, added to the
// running sum from 0 or from the centre tap), so the outputs are bit-identical to the JS loops, which run where the
// .wasm file is missing. On the 8 kHz live path these loops were ~12 % of the live worker's CPU.
//
//   coef   PAIRS float64 taps (the interpolator's doubled ones or the decimator's)
//   src    float32 samples; dst float32 outputs

/** Two float32 samples at p, p + 4 bytes, widened to float64 lanes. */
@inline function pair32(p: usize): v128 {
  return f64x2.promote_low_f32x4(v128.load64_zero(p));
}

/** Two float32 samples at p and p + 8 bytes (every second sample), widened. */
@inline function every2nd(p: usize): v128 {
  const four = v128.load(p);
  return f64x2.promote_low_f32x4(v128.shuffle<f32>(four, four, 0, 2, 0, 2));
}

/**
 * Interpolator2.process's loop: for m < n, with lo = hist + m - pairs, out[2m] = Σ_j coef[j] (src[lo - j] +
 * src[lo + 1 + j]) and out[2m + 1] = src[lo + 1]. `src` holds `hist` samples of history, then the n new ones.
 */
export function interpolate(coef: usize, pairs: i32, src: usize, hist: i32, n: i32, dst: usize): void {
  let m = 0;
  // Eight outputs a step in four independent sums: one sum's chain of dependent adds would leave the unit idle.
  for (; m + 7 < n; m += 8) {
    const lo = hist + m - pairs;
    let a0 = f64x2.splat(0);
    let a1 = f64x2.splat(0);
    let a2 = f64x2.splat(0);
    let a3 = f64x2.splat(0);
    for (let j = 0; j < pairs; j++) {
      const c = f64x2.splat(load<f64>(coef + (<usize>j << 3)));
      const p = src + (<usize>(lo - j) << 2);
      const q = src + (<usize>(lo + 1 + j) << 2);
      a0 = f64x2.add(a0, f64x2.mul(c, f64x2.add(pair32(p), pair32(q))));
      a1 = f64x2.add(a1, f64x2.mul(c, f64x2.add(pair32(p + 8), pair32(q + 8))));
      a2 = f64x2.add(a2, f64x2.mul(c, f64x2.add(pair32(p + 16), pair32(q + 16))));
      a3 = f64x2.add(a3, f64x2.mul(c, f64x2.add(pair32(p + 24), pair32(q + 24))));
    }
    const o = dst + (<usize>(2 * m) << 2);
    const d = src + (<usize>(lo + 1) << 2);
    store<f32>(o, <f32>f64x2.extract_lane(a0, 0));
    store<f32>(o + 4, load<f32>(d));
    store<f32>(o + 8, <f32>f64x2.extract_lane(a0, 1));
    store<f32>(o + 12, load<f32>(d + 4));
    store<f32>(o + 16, <f32>f64x2.extract_lane(a1, 0));
    store<f32>(o + 20, load<f32>(d + 8));
    store<f32>(o + 24, <f32>f64x2.extract_lane(a1, 1));
    store<f32>(o + 28, load<f32>(d + 12));
    store<f32>(o + 32, <f32>f64x2.extract_lane(a2, 0));
    store<f32>(o + 36, load<f32>(d + 16));
    store<f32>(o + 40, <f32>f64x2.extract_lane(a2, 1));
    store<f32>(o + 44, load<f32>(d + 20));
    store<f32>(o + 48, <f32>f64x2.extract_lane(a3, 0));
    store<f32>(o + 52, load<f32>(d + 24));
    store<f32>(o + 56, <f32>f64x2.extract_lane(a3, 1));
    store<f32>(o + 60, load<f32>(d + 28));
  }
  for (; m + 1 < n; m += 2) {
    const lo = hist + m - pairs;
    let acc = f64x2.splat(0);
    for (let j = 0; j < pairs; j++) {
      const a = pair32(src + (<usize>(lo - j) << 2));
      const b = pair32(src + (<usize>(lo + 1 + j) << 2));
      acc = f64x2.add(acc, f64x2.mul(f64x2.splat(load<f64>(coef + (<usize>j << 3))), f64x2.add(a, b)));
    }
    const o = dst + (<usize>(2 * m) << 2);
    store<f32>(o, <f32>f64x2.extract_lane(acc, 0));
    store<f32>(o + 4, load<f32>(src + (<usize>(lo + 1) << 2)));
    store<f32>(o + 8, <f32>f64x2.extract_lane(acc, 1));
    store<f32>(o + 12, load<f32>(src + (<usize>(lo + 2) << 2)));
  }
  if (m < n) {
    const lo = hist + m - pairs;
    let acc: f64 = 0;
    for (let j = 0; j < pairs; j++) {
      const a = <f64>load<f32>(src + (<usize>(lo - j) << 2));
      const b = <f64>load<f32>(src + (<usize>(lo + 1 + j) << 2));
      acc += load<f64>(coef + (<usize>j << 3)) * (a + b);
    }
    const o = dst + (<usize>(2 * m) << 2);
    store<f32>(o, <f32>acc);
    store<f32>(o + 4, load<f32>(src + (<usize>(lo + 1) << 2)));
  }
}

/**
 * Decimator2.process's loop: for i < count, with c = centre + 2i, out[i] = 0.5 src[c] + Σ_j coef[j] (src[c - 2j - 1]
 * + src[c + 2j + 1]).
 */
export function decimate(coef: usize, pairs: i32, src: usize, centre: i32, count: i32, dst: usize): void {
  let i = 0;
  // Eight outputs a step in four independent sums (as interpolate's).
  const half = f64x2.splat(0.5);
  for (; i + 7 < count; i += 8) {
    const c0 = src + (<usize>(centre + 2 * i) << 2);
    let a0 = f64x2.mul(half, every2nd(c0));
    let a1 = f64x2.mul(half, every2nd(c0 + 16));
    let a2 = f64x2.mul(half, every2nd(c0 + 32));
    let a3 = f64x2.mul(half, every2nd(c0 + 48));
    for (let j = 0; j < pairs; j++) {
      const c = f64x2.splat(load<f64>(coef + (<usize>j << 3)));
      const p = c0 - (<usize>(2 * j + 1) << 2);
      const q = c0 + (<usize>(2 * j + 1) << 2);
      a0 = f64x2.add(a0, f64x2.mul(c, f64x2.add(every2nd(p), every2nd(q))));
      a1 = f64x2.add(a1, f64x2.mul(c, f64x2.add(every2nd(p + 16), every2nd(q + 16))));
      a2 = f64x2.add(a2, f64x2.mul(c, f64x2.add(every2nd(p + 32), every2nd(q + 32))));
      a3 = f64x2.add(a3, f64x2.mul(c, f64x2.add(every2nd(p + 48), every2nd(q + 48))));
    }
    const o = dst + (<usize>i << 2);
    store<f32>(o, <f32>f64x2.extract_lane(a0, 0));
    store<f32>(o + 4, <f32>f64x2.extract_lane(a0, 1));
    store<f32>(o + 8, <f32>f64x2.extract_lane(a1, 0));
    store<f32>(o + 12, <f32>f64x2.extract_lane(a1, 1));
    store<f32>(o + 16, <f32>f64x2.extract_lane(a2, 0));
    store<f32>(o + 20, <f32>f64x2.extract_lane(a2, 1));
    store<f32>(o + 24, <f32>f64x2.extract_lane(a3, 0));
    store<f32>(o + 28, <f32>f64x2.extract_lane(a3, 1));
  }
  for (; i + 1 < count; i += 2) {
    const c = centre + 2 * i;
    let acc = f64x2.mul(f64x2.splat(0.5), every2nd(src + (<usize>c << 2)));
    for (let j = 0; j < pairs; j++) {
      const a = every2nd(src + (<usize>(c - 2 * j - 1) << 2));
      const b = every2nd(src + (<usize>(c + 2 * j + 1) << 2));
      acc = f64x2.add(acc, f64x2.mul(f64x2.splat(load<f64>(coef + (<usize>j << 3))), f64x2.add(a, b)));
    }
    const o = dst + (<usize>i << 2);
    store<f32>(o, <f32>f64x2.extract_lane(acc, 0));
    store<f32>(o + 4, <f32>f64x2.extract_lane(acc, 1));
  }
  if (i < count) {
    const c = centre + 2 * i;
    let acc: f64 = 0.5 * <f64>load<f32>(src + (<usize>c << 2));
    for (let j = 0; j < pairs; j++) {
      const a = <f64>load<f32>(src + (<usize>(c - 2 * j - 1) << 2));
      const b = <f64>load<f32>(src + (<usize>(c + 2 * j + 1) << 2));
      acc += load<f64>(coef + (<usize>j << 3)) * (a + b);
    }
    store<f32>(dst + (<usize>i << 2), <f32>acc);
  }
}
