// AssemblyScript (compiled to WebAssembly by `npm run build`, not by tsc): the echo canceller's loops over partitions
// and bins (src/dsp/aec/kernel.ts loads it; one instance per thread on the cancellers' shared heap, aec/heap.ts), four
// bins per SIMD operation in float32. Arrays are float32 with `kp` values per row (the bins rounded up to a multiple of 4, the padding zero);
// `offs` holds, per partition, the element offset of its reference spectrum in the ring (ringRe/ringIm/ringPow).
//   filter     Ŷ = Σ_p X_p W_p and Φ = Σ_p |X_p|² P_p (the Kalman filter's expected residual, before the R/M factor)
//   update     the diagonal Kalman update of every partition (kalman-filter.ts has the equations)
//   sfilter    the shadow filter's Ŷ and Σ_p |X_p|² (its normalisation)
//   supdate    the shadow's normalised block-LMS step, W_p += g X_p* E
//   backprop   Z = Σ_p conj(W_p) E_p over partitions (E from a ring: the error propagated back to one reference frame)
//   gram       for J spectra A_j: gz_j = Σ_k Re(A_j Z*) with a spectrum Z, then each A_j scaled by a weight per bin and
//              G_jl = Σ_k Re(A_j A_l*) (the loudspeaker model's correlations and Gram matrix, its hot spot)
//   corr       the delay estimator's correlation of one microphone vector with the reference history, per lag
//   touch      one load per 64-byte line of a list of byte ranges, the loads independent of each other: brings a
//              canceller's state into cache before its hop at many misses in flight (see below)
//   pcross     the prior scale's cross-spectra of ring entries with one microphone spectrum, per lag, in float64 (two
//              bins per operation; each lane's operations are prior-scale.ts's JavaScript, so the sums are bit-identical)
//   tcue       the talker cue's smoothed cross-spectra per lag and their explained sums (float32, four bins per
//              operation; kernel.ts's JavaScript loop rounds each operation to float32 in the same order: bit-identical)

@inline function ld(p: usize): v128 {
  return v128.load(p);
}

export function filter(P: i32, offs: usize, ringRe: usize, ringIm: usize, ringPow: usize, wRe: usize, wIm: usize, pv: usize, yRe: usize, yIm: usize, phi: usize, kp: i32): void {
  const row = <usize>kp << 2;
  for (let k: usize = 0; k < row; k += 16) {
    let yr = f32x4.splat(0);
    let yi = f32x4.splat(0);
    let ph = f32x4.splat(0);
    for (let p = 0; p < P; p++) {
      const base = (<usize>load<i32>(offs + (<usize>p << 2)) << 2) + k;
      const w = <usize>p * row + k;
      const ar = ld(ringRe + base);
      const ai = ld(ringIm + base);
      const br = ld(wRe + w);
      const bi = ld(wIm + w);
      yr = f32x4.add(yr, f32x4.sub(f32x4.mul(ar, br), f32x4.mul(ai, bi)));
      yi = f32x4.add(yi, f32x4.add(f32x4.mul(ar, bi), f32x4.mul(ai, br)));
      ph = f32x4.add(ph, f32x4.mul(ld(ringPow + base), ld(pv + w)));
    }
    v128.store(yRe + k, yr);
    v128.store(yIm + k, yi);
    v128.store(phi + k, ph);
  }
}

export function update(P: i32, offs: usize, ringRe: usize, ringIm: usize, ringPow: usize, wRe: usize, wIm: usize, pv: usize, inv: usize, eRe: usize, eIm: usize, a2: f32, q: f32, kp: i32): void {
  const row = <usize>kp << 2;
  const va2 = f32x4.splat(a2);
  const vq = f32x4.splat(q);
  const half = f32x4.splat(0.5);
  const one = f32x4.splat(1);
  for (let k: usize = 0; k < row; k += 16) {
    const er = ld(eRe + k);
    const ei = ld(eIm + k);
    const iv = ld(inv + k);
    for (let p = 0; p < P; p++) {
      const base = (<usize>load<i32>(offs + (<usize>p << 2)) << 2) + k;
      const w = <usize>p * row + k;
      const pk = ld(pv + w);
      const g = f32x4.mul(pk, iv);
      const ar = ld(ringRe + base);
      const ai = ld(ringIm + base);
      const nr = f32x4.add(ld(wRe + w), f32x4.mul(g, f32x4.add(f32x4.mul(ar, er), f32x4.mul(ai, ei))));
      const ni = f32x4.add(ld(wIm + w), f32x4.mul(g, f32x4.sub(f32x4.mul(ar, ei), f32x4.mul(ai, er))));
      v128.store(wRe + w, nr);
      v128.store(wIm + w, ni);
      const shrink = f32x4.sub(one, f32x4.mul(f32x4.mul(half, g), ld(ringPow + base)));
      const np = f32x4.add(f32x4.mul(f32x4.mul(va2, shrink), pk), f32x4.mul(vq, f32x4.add(f32x4.mul(nr, nr), f32x4.mul(ni, ni))));
      v128.store(pv + w, np);
    }
  }
}

export function sfilter(P: i32, offs: usize, ringRe: usize, ringIm: usize, ringPow: usize, wRe: usize, wIm: usize, yRe: usize, yIm: usize, norm: usize, kp: i32): void {
  const row = <usize>kp << 2;
  for (let k: usize = 0; k < row; k += 16) {
    let yr = f32x4.splat(0);
    let yi = f32x4.splat(0);
    let nm = f32x4.splat(0);
    for (let p = 0; p < P; p++) {
      const base = (<usize>load<i32>(offs + (<usize>p << 2)) << 2) + k;
      const w = <usize>p * row + k;
      const ar = ld(ringRe + base);
      const ai = ld(ringIm + base);
      const br = ld(wRe + w);
      const bi = ld(wIm + w);
      yr = f32x4.add(yr, f32x4.sub(f32x4.mul(ar, br), f32x4.mul(ai, bi)));
      yi = f32x4.add(yi, f32x4.add(f32x4.mul(ar, bi), f32x4.mul(ai, br)));
      nm = f32x4.add(nm, ld(ringPow + base));
    }
    v128.store(yRe + k, yr);
    v128.store(yIm + k, yi);
    v128.store(norm + k, nm);
  }
}

export function supdate(P: i32, offs: usize, ringRe: usize, ringIm: usize, wRe: usize, wIm: usize, g: usize, eRe: usize, eIm: usize, kp: i32): void {
  const row = <usize>kp << 2;
  for (let k: usize = 0; k < row; k += 16) {
    const gv = ld(g + k);
    const er = f32x4.mul(gv, ld(eRe + k));
    const ei = f32x4.mul(gv, ld(eIm + k));
    for (let p = 0; p < P; p++) {
      const base = (<usize>load<i32>(offs + (<usize>p << 2)) << 2) + k;
      const w = <usize>p * row + k;
      const ar = ld(ringRe + base);
      const ai = ld(ringIm + base);
      v128.store(wRe + w, f32x4.add(ld(wRe + w), f32x4.add(f32x4.mul(ar, er), f32x4.mul(ai, ei))));
      v128.store(wIm + w, f32x4.add(ld(wIm + w), f32x4.sub(f32x4.mul(ar, ei), f32x4.mul(ai, er))));
    }
  }
}

export function backprop(P: i32, offs: usize, eRe: usize, eIm: usize, wRe: usize, wIm: usize, zRe: usize, zIm: usize, kp: i32): void {
  const row = <usize>kp << 2;
  for (let k: usize = 0; k < row; k += 16) {
    let zr = f32x4.splat(0);
    let zi = f32x4.splat(0);
    for (let p = 0; p < P; p++) {
      const base = (<usize>load<i32>(offs + (<usize>p << 2)) << 2) + k;
      const w = <usize>p * row + k;
      const er = ld(eRe + base);
      const ei = ld(eIm + base);
      const br = ld(wRe + w);
      const bi = ld(wIm + w);
      zr = f32x4.add(zr, f32x4.add(f32x4.mul(br, er), f32x4.mul(bi, ei)));
      zi = f32x4.add(zi, f32x4.sub(f32x4.mul(br, ei), f32x4.mul(bi, er)));
    }
    v128.store(zRe + k, zr);
    v128.store(zIm + k, zi);
  }
}

@inline function hsum(v: v128): f32 {
  return f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1) + f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3);
}

export function gram(J: i32, re: usize, im: usize, wt: usize, zRe: usize, zIm: usize, gz: usize, out: usize, kp: i32): void {
  const row = <usize>kp << 2;
  for (let j = 0; j < J; j++) {
    const o = <usize>j * row;
    let acc = f32x4.splat(0);
    for (let k: usize = 0; k < row; k += 16) {
      acc = f32x4.add(acc, f32x4.add(f32x4.mul(ld(re + o + k), ld(zRe + k)), f32x4.mul(ld(im + o + k), ld(zIm + k))));
    }
    store<f32>(gz + (<usize>j << 2), hsum(acc));
    for (let k: usize = 0; k < row; k += 16) {
      const w = ld(wt + k);
      v128.store(re + o + k, f32x4.mul(ld(re + o + k), w));
      v128.store(im + o + k, f32x4.mul(ld(im + o + k), w));
    }
  }
  for (let j = 0; j < J; j++) {
    const a = <usize>j * row;
    for (let l = j; l < J; l++) {
      const b = <usize>l * row;
      let acc = f32x4.splat(0);
      for (let k: usize = 0; k < row; k += 16) {
        acc = f32x4.add(acc, f32x4.add(f32x4.mul(ld(re + a + k), ld(re + b + k)), f32x4.mul(ld(im + a + k), ld(im + b + k))));
      }
      const v = hsum(acc);
      store<f32>(out + ((<usize>(j * J + l)) << 2), v);
      store<f32>(out + ((<usize>(l * J + j)) << 2), v);
    }
  }
}

/**
 * For lag l = 0..lags-1 (reference vector `head - l` of the ring of `lags` vectors of 32 floats at hist):
 * cxy[l] += a (x·m − cxy[l]), cxx[l] += a (norm[entry] − cxx[l]).
 */
export function corr(hist: usize, norms: usize, head: i32, lags: i32, mic: usize, cxy: usize, cxx: usize, a: f32): void {
  const m0 = ld(mic);
  const m1 = ld(mic + 16);
  const m2 = ld(mic + 32);
  const m3 = ld(mic + 48);
  const m4 = ld(mic + 64);
  const m5 = ld(mic + 80);
  const m6 = ld(mic + 96);
  const m7 = ld(mic + 112);
  let i = head;
  for (let l = 0; l < lags; l++) {
    const h = hist + (<usize>i << 7);
    let s = f32x4.mul(ld(h), m0);
    s = f32x4.add(s, f32x4.mul(ld(h + 16), m1));
    s = f32x4.add(s, f32x4.mul(ld(h + 32), m2));
    s = f32x4.add(s, f32x4.mul(ld(h + 48), m3));
    s = f32x4.add(s, f32x4.mul(ld(h + 64), m4));
    s = f32x4.add(s, f32x4.mul(ld(h + 80), m5));
    s = f32x4.add(s, f32x4.mul(ld(h + 96), m6));
    s = f32x4.add(s, f32x4.mul(ld(h + 112), m7));
    const xy = f32x4.extract_lane(s, 0) + f32x4.extract_lane(s, 1) + f32x4.extract_lane(s, 2) + f32x4.extract_lane(s, 3);
    const c = cxy + (<usize>l << 2);
    store<f32>(c, load<f32>(c) + a * (xy - load<f32>(c)));
    const x = cxx + (<usize>l << 2);
    store<f32>(x, load<f32>(x) + a * (load<f32>(norms + (<usize>i << 2)) - load<f32>(x)));
    i = i == 0 ? lags - 1 : i - 1;
  }
}

/** Two float32 values at p, promoted to float64 lanes. */
@inline function ld2(p: usize): v128 {
  return f64x2.promote_low_f32x4(v128.load64_zero(p));
}

/**
 * For L lags, ring entries head, head − 1, … (wrapping below 0 to cap − 1), rows of kp float32 at ringRe/ringIm/ringPow,
 * against one spectrum D (kp float64 at dRe, dIm): per bin, with lag l's rows of kp float64 at re, im, ch,
 *   re += xr·dr + xi·di,   im += xr·di − xi·dr,   ch += |X|²·(dr² + di²)
 * kp even; the padding bins add zeros.
 */
export function pcross(L: i32, head: i32, cap: i32, ringRe: usize, ringIm: usize, ringPow: usize, dRe: usize, dIm: usize, re: usize, im: usize, ch: usize, kp: i32): void {
  const frow = <usize>kp << 2;
  const drow = <usize>kp << 3;
  let i = head;
  for (let l = 0; l < L; l++) {
    const x = <usize>i * frow;
    const o = <usize>l * drow;
    for (let k: usize = 0; k < <usize>kp; k += 2) {
      const xr = ld2(ringRe + x + (k << 2));
      const xi = ld2(ringIm + x + (k << 2));
      const dr = v128.load(dRe + (k << 3));
      const di = v128.load(dIm + (k << 3));
      const r = re + o + (k << 3);
      const j = im + o + (k << 3);
      const c = ch + o + (k << 3);
      v128.store(r, f64x2.add(v128.load(r), f64x2.add(f64x2.mul(xr, dr), f64x2.mul(xi, di))));
      v128.store(j, f64x2.add(v128.load(j), f64x2.sub(f64x2.mul(xr, di), f64x2.mul(xi, dr))));
      v128.store(c, f64x2.add(v128.load(c), f64x2.mul(ld2(ringPow + x + (k << 2)), f64x2.add(f64x2.mul(dr, dr), f64x2.mul(di, di)))));
    }
    i = i == 0 ? cap - 1 : i - 1;
  }
}

/**
 * The talker cue (talker-cue.ts): for L lags, ring entries head, head − 1, … (wrapping below 0 to cap − 1; rows of
 * `stride` float32 at ringRe/ringIm/ringPow), at B bins from, from + 2, … (B a multiple of 4), against one microphone
 * spectrum (B float32 at dRe, dIm): per lag and bin, with weight a, C += a·(X*·D − C) and S += a·(|X|² − S) (float32
 * rows of B per lag at cRe, cIm, xx), then per[l] = Σ over bins with S > 0 of |C|²/S, four bins per operation (bin j in
 * lane j mod 4, the lanes' sums added as (0 + 1) + (2 + 3): kernel.ts's JavaScript loop does the same, bit for bit).
 */
export function tcue(L: i32, head: i32, cap: i32, ringRe: usize, ringIm: usize, ringPow: usize, stride: i32, from: i32, dRe: usize, dIm: usize, cRe: usize, cIm: usize, xx: usize, per: usize, B: i32, a: f32): void {
  const va = f32x4.splat(a);
  const zero = f32x4.splat(0);
  const rowB = <usize>B << 2;
  let i = head;
  let o: usize = 0;
  for (let l = 0; l < L; l++) {
    const x = (<usize>i * <usize>stride + <usize>from) << 2;
    let num = zero;
    for (let j: usize = 0; j < rowB; j += 16) {
      // Bins from + 2j … from + 2j + 6: every other float of two vectors.
      const p = x + (j << 1);
      const xr = v128.shuffle<f32>(ld(ringRe + p), ld(ringRe + p + 16), 0, 2, 4, 6);
      const xi = v128.shuffle<f32>(ld(ringIm + p), ld(ringIm + p + 16), 0, 2, 4, 6);
      const xp = v128.shuffle<f32>(ld(ringPow + p), ld(ringPow + p + 16), 0, 2, 4, 6);
      const dr = ld(dRe + j);
      const di = ld(dIm + j);
      const re = f32x4.add(f32x4.mul(xr, dr), f32x4.mul(xi, di));
      const im = f32x4.sub(f32x4.mul(xr, di), f32x4.mul(xi, dr));
      const q = o + j;
      const c0 = ld(cRe + q);
      const c1 = ld(cIm + q);
      const s0 = ld(xx + q);
      const cr = f32x4.add(c0, f32x4.mul(va, f32x4.sub(re, c0)));
      const ci = f32x4.add(c1, f32x4.mul(va, f32x4.sub(im, c1)));
      const s = f32x4.add(s0, f32x4.mul(va, f32x4.sub(xp, s0)));
      v128.store(cRe + q, cr);
      v128.store(cIm + q, ci);
      v128.store(xx + q, s);
      // Where S ≤ 0 the quotient (NaN or ∞) is masked to +0, which adds nothing, as the JavaScript loop skips it.
      num = f32x4.add(num, v128.and(f32x4.div(f32x4.add(f32x4.mul(cr, cr), f32x4.mul(ci, ci)), s), f32x4.gt(s, zero)));
    }
    const sum = f32x4.extract_lane(num, 0) + f32x4.extract_lane(num, 1) + (f32x4.extract_lane(num, 2) + f32x4.extract_lane(num, 3));
    store<f32>(per + (<usize>l << 2), sum);
    o += rowB;
    i = i == 0 ? cap - 1 : i - 1;
  }
}

/**
 * `n` ranges (byte address, byte length: pairs of u32 at `list`; each a multiple of 16 bytes, 16-byte aligned): one
 * 16-byte load per 64-byte line, OR-ed into four accumulators so that no load waits for another's value. A stream's
 * state is cold when its hop starts (the other streams' hops ran in between): the partition loops then missed one
 * line at a time (a strided access each), and this scan, which has many misses in flight at once, brings the same
 * lines in about twice as fast as those loops waited for them (docs/echo.md, "Cold state"). Returns a lane of the OR
 * so that the loads are not dropped as dead.
 */
export function touch(list: usize, n: i32): i32 {
  let a = i32x4.splat(0);
  let b = i32x4.splat(0);
  let c = i32x4.splat(0);
  let d = i32x4.splat(0);
  for (let r = 0; r < n; r++) {
    const at = <usize>load<u32>(list + (<usize>r << 3));
    const end = at + <usize>load<u32>(list + (<usize>r << 3) + 4);
    let q = at;
    for (; q + 256 <= end; q += 256) {
      a = v128.or(a, ld(q));
      b = v128.or(b, ld(q + 64));
      c = v128.or(c, ld(q + 128));
      d = v128.or(d, ld(q + 192));
    }
    for (; q + 16 <= end; q += 64) a = v128.or(a, ld(q));
    if (end > at) b = v128.or(b, ld(end - 16));
  }
  return i32x4.extract_lane(v128.or(v128.or(a, b), v128.or(c, d)), 0);
}
