// Loudness measurement (ITU-R BS.1770-4 / EBU R128), streaming and in-process:
//
//   K-weighting   two biquads per channel (high shelf +4 dB above ~1.7 kHz, high-pass at ~38 Hz), coefficients
//                 derived for any sample rate from the filters' analogue parameters (as libebur128 does), so 16, 44.1
//                 and 48 kHz all measure the same curve
//   blocks        400 ms gating blocks with 75 % overlap, built from 100 ms sub-block energies (channel weights: 1,
//                 and 1.41 for the surround pair of a 5.1 layout; LFE not counted)
//   integrated    absolute gate −70 LUFS, relative gate −10 LU below the mean of the blocks above it
//   true peak     4× oversampling (polyphase windowed-sinc interpolator) below 96 kHz, 2× from 96 kHz, as Annex 2
//
// Memory per file is one number per 100 ms (the sub-block energies), so an hour costs ~280 KB. The meter is checked
// against ffmpeg's ebur128 filter in test/integration/loudness.test.ts. Why not a library: the npm packages found measure whole
// in-memory signals (mono/stereo only), which would break the pipeline's bounded memory; ffmpeg's ebur128 runs only
// where an ffmpeg child already runs, and the in-process WAV path has none.

/** The two K-weighting stages for sample rate `fs` (BS.1770-4's filters, re-derived for fs as libebur128 does). */
export function kWeightingCoefficients(fs: number): Array<{ b: [number, number, number]; a: [number, number] }> {
  // Stage 1: high shelf.
  const f0 = 1681.974450955533;
  const G = 3.999843853973347;
  const Q = 0.7071752369554196;
  let K = Math.tan((Math.PI * f0) / fs);
  const Vh = Math.pow(10, G / 20);
  const Vb = Math.pow(Vh, 0.4996667741545416);
  let a0 = 1 + K / Q + K * K;
  const shelf = {
    b: [(Vh + (Vb * K) / Q + K * K) / a0, (2 * (K * K - Vh)) / a0, (Vh - (Vb * K) / Q + K * K) / a0] as [number, number, number],
    a: [(2 * (K * K - 1)) / a0, (1 - K / Q + K * K) / a0] as [number, number],
  };
  // Stage 2: high-pass (RLB weighting).
  const f1 = 38.13547087602444;
  const Q1 = 0.5003270373238773;
  K = Math.tan((Math.PI * f1) / fs);
  a0 = 1 + K / Q1 + K * K;
  const highpass = {
    b: [1, -2, 1] as [number, number, number],
    a: [(2 * (K * K - 1)) / a0, (1 - K / Q1 + K * K) / a0] as [number, number],
  };
  return [shelf, highpass];
}

/** Channel weights of BS.1770: 1 for front channels, 1.41 for the surround pair of 5.1, 0 for its LFE. */
export function channelWeights(channels: number): number[] {
  if (channels === 6) return [1, 1, 1, 0, 1.41, 1.41]; // L R C LFE Ls Rs (the order ffmpeg decodes 5.1 to)
  return new Array(channels).fill(1);
}

/** Loudness in LUFS of a weighted mean square. */
export function lufsOf(meanSquare: number): number {
  return -0.691 + 10 * Math.log10(meanSquare);
}

const ABSOLUTE_GATE_LUFS = -70;
const RELATIVE_GATE_LU = -10;

/** A growable list of float64 values (one per 100 ms sub-block). */
class Float64List {
  private data = new Float64Array(1024);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.length++] = v;
  }
  get(i: number): number {
    return this.data[i];
  }
}

/**
 * Streaming BS.1770 loudness meter: push planar chunks of any length; read the integrated loudness and the 400 ms
 * block powers at any time.
 */
export class LoudnessMeter {
  // Shelf (b0 b1 b2 a1 a2) and high-pass (a1 a2; its numerator is 1 −2 1) coefficients.
  private readonly k: Float64Array;
  /** Per channel: the two stages' transposed-direct-form states (4 values). */
  private readonly state: Float64Array;
  private readonly weights: number[];
  private readonly subLength: number;
  private readonly subs = new Float64List();
  private subEnergy = 0;
  private subFill = 0;

  constructor(
    readonly sampleRate: number,
    readonly channels: number,
  ) {
    const [shelf, hp] = kWeightingCoefficients(sampleRate);
    this.k = Float64Array.from([...shelf.b, ...shelf.a, ...hp.a]);
    this.state = new Float64Array(4 * channels);
    this.weights = channelWeights(channels);
    this.subLength = Math.max(1, Math.round(sampleRate / 10));
  }

  /**
   * Both K-weighting stages over all of channel c's chunk in one loop, adding w × the sum of squares of each piece
   * that ends on a 100 ms boundary to sums[k] (piece k; the first piece completes the sub-block in progress); returns
   * the sum of squares of the samples after the last boundary. One call per channel and chunk, not per sub-block.
   * Nothing but the return follows the loop: V8 optimises this function inside its first long loop (on-stack
   * replacement), before code after the loop has run, and such code then deoptimised it on every call (measured).
   */
  private energyInto(c: number, x: Float32Array, w: number, sums: Float64Array): number {
    const k = this.k;
    const b0 = k[0], b1 = k[1], b2 = k[2], a1 = k[3], a2 = k[4], h1 = k[5], h2 = k[6];
    const st = this.state;
    const o = 4 * c;
    let s1 = st[o], s2 = st[o + 1], t1 = st[o + 2], t2 = st[o + 3];
    let sum = 0;
    let piece = 0;
    const subLength = this.subLength;
    let left = subLength - this.subFill;
    for (let i = 0, n = x.length; i < n; i++) {
      const v = x[i];
      const y = b0 * v + s1;
      s1 = b1 * v - a1 * y + s2;
      s2 = b2 * v - a2 * y;
      const z = y + t1;
      t1 = -2 * y - h1 * z + t2;
      t2 = y - h2 * z;
      sum += z * z;
      // Stored on every sample, not once after the loop: with the states live past the loop, V8's optimised code
      // spilled them and the loop ran ~1.7× slower (measured).
      st[o] = s1;
      st[o + 1] = s2;
      st[o + 2] = t1;
      st[o + 3] = t2;
      if (--left === 0) {
        sums[piece++] += w * sum;
        sum = 0;
        left = subLength;
      }
    }
    return sum;
  }

  private sums = new Float64Array(0);

  push(planar: Float32Array[]): void {
    const n = planar[0]?.length ?? 0;
    if (n === 0) return;
    // Pieces of this chunk between 100 ms boundaries, so each sub-block's energy is exact.
    const first = this.subLength - this.subFill;
    const pieces = n <= first ? 1 : 1 + Math.ceil((n - first) / this.subLength);
    if (this.sums.length < pieces) this.sums = new Float64Array(pieces);
    const sums = this.sums;
    sums.fill(0, 0, pieces);
    for (let c = 0; c < this.channels; c++) {
      const w = this.weights[c];
      if (w === 0) continue;
      const tail = this.energyInto(c, planar[c], w, sums);
      // The samples after the last boundary belong to the last piece (0 when the chunk ends on a boundary).
      sums[pieces - 1] += w * tail;
    }
    let done = 0;
    for (let p = 0; p < pieces; p++) {
      const take = Math.min(n - done, this.subLength - this.subFill);
      this.subEnergy += sums[p];
      this.subFill += take;
      done += take;
      if (this.subFill === this.subLength) {
        this.subs.push(this.subEnergy / this.subLength);
        this.subEnergy = 0;
        this.subFill = 0;
      }
    }
  }

  /** Weighted mean square of each complete 400 ms block (hop 100 ms), in order. */
  blockPowers(): Float64Array {
    const count = Math.max(0, this.subs.length - 3);
    const out = new Float64Array(count);
    for (let j = 0; j < count; j++) {
      out[j] = (this.subs.get(j) + this.subs.get(j + 1) + this.subs.get(j + 2) + this.subs.get(j + 3)) / 4;
    }
    return out;
  }

  /** Integrated (gated) loudness in LUFS; null when no block is above the absolute gate (silence, or < 400 ms). */
  integrated(): number | null {
    return gatedLoudness(this.blockPowers());
  }
}

/** BS.1770 two-stage gating over block powers; null when nothing passes the absolute gate. */
export function gatedLoudness(blocks: Float64Array): number | null {
  let sum = 0;
  let count = 0;
  for (const z of blocks) {
    if (z > 0 && lufsOf(z) > ABSOLUTE_GATE_LUFS) {
      sum += z;
      count++;
    }
  }
  if (count === 0) return null;
  const relativeGate = lufsOf(sum / count) + RELATIVE_GATE_LU;
  let gatedSum = 0;
  let gatedCount = 0;
  for (const z of blocks) {
    if (z > 0) {
      const l = lufsOf(z);
      if (l > ABSOLUTE_GATE_LUFS && l > relativeGate) {
        gatedSum += z;
        gatedCount++;
      }
    }
  }
  return gatedCount === 0 ? null : lufsOf(gatedSum / gatedCount);
}

/**
 * How much the denoiser attenuated the noise, in dB: the input/output energy ratio over the quietest fifth of the
 * input's 400 ms blocks (those above the −70 LUFS gate), where noise rather than speech dominates. Both block lists
 * come from meters at the same rate over time-aligned audio. Null when no block qualifies.
 */
export function noiseRemovedDb(input: Float64Array, output: Float64Array): number | null {
  const n = Math.min(input.length, output.length);
  const eligible: number[] = [];
  for (let j = 0; j < n; j++) if (input[j] > 0 && lufsOf(input[j]) > ABSOLUTE_GATE_LUFS) eligible.push(j);
  if (eligible.length === 0) return null;
  eligible.sort((a, b) => input[a] - input[b]);
  const quiet = eligible.slice(0, Math.max(1, Math.ceil(eligible.length * 0.2)));
  let pin = 0;
  let pout = 0;
  for (const j of quiet) {
    pin += input[j];
    pout += output[j];
  }
  return 10 * Math.log10(pin / Math.max(pout, pin * 1e-12));
}

// ---- true peak ------------------------------------------------------------------------------------------------

/** Taps per polyphase branch of the true-peak interpolator (the prototype has factor × TAPS coefficients). */
const TAPS = 16;

function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  for (let k = 1; k < 50; k++) {
    term *= (x / (2 * k)) * (x / (2 * k));
    sum += term;
    if (term < 1e-12 * sum) break;
  }
  return sum;
}

/** Polyphase branches of a Kaiser-windowed sinc interpolator: branch p gives the sample at offset p/factor. */
function interpolatorBranches(factor: number): Float64Array[] {
  const length = factor * TAPS;
  const beta = 8;
  const centre = (length - 1) / 2;
  const h = new Float64Array(length);
  for (let i = 0; i < length; i++) {
    const t = (i - centre) / factor;
    const sinc = t === 0 ? 1 : Math.sin(Math.PI * t) / (Math.PI * t);
    const r = (i - centre) / (centre + 1);
    h[i] = sinc * (besselI0(beta * Math.sqrt(Math.max(0, 1 - r * r))) / besselI0(beta));
  }
  const branches: Float64Array[] = [];
  for (let p = 0; p < factor; p++) {
    const b = new Float64Array(TAPS);
    let sum = 0;
    for (let k = 0; k < TAPS; k++) {
      b[k] = h[p + k * factor];
      sum += b[k];
    }
    for (let k = 0; k < TAPS; k++) b[k] /= sum; // each branch passes DC at unit gain
    branches.push(b);
  }
  return branches;
}

/**
 * True-peak estimator: for every input frame, the largest absolute value of the oversampled signal over all
 * channels around it. `peaks()` hands back per-frame estimates delayed by `delay` frames (the interpolator's
 * centre), which the limiter aligns with its own delay line.
 */
export class TruePeakInterpolator {
  readonly factor: number;
  /** Frames between an input frame and the peak estimate that belongs to it. */
  readonly delay = TAPS / 2;
  /** Every branch's taps reversed, one after the other: branch p's at [p·TAPS, (p+1)·TAPS). */
  private readonly reversed: Float64Array;
  private readonly history: Float64Array[];
  private pos = 0;
  private maxSeen = 0;

  constructor(
    sampleRate: number,
    readonly channels: number,
  ) {
    this.factor = sampleRate < 96000 ? 4 : 2;
    const branches = interpolatorBranches(this.factor);
    this.reversed = new Float64Array(this.factor * TAPS);
    branches.forEach((b, p) => {
      for (let k = 0; k < TAPS; k++) this.reversed[p * TAPS + k] = b[TAPS - 1 - k];
    });
    // Doubled ring buffer: the last TAPS samples are always contiguous at [pos, pos + TAPS).
    this.history = Array.from({ length: channels }, () => new Float64Array(2 * TAPS));
  }

  /** Feeds one chunk; writes each frame's oversampled peak (all channels) into `out` (length ≥ frames). */
  process(planar: Float32Array[], out: Float64Array): void {
    const n = planar[0].length;
    out.fill(0, 0, n);
    const r = this.reversed;
    const bEnd = r.length;
    for (let c = 0; c < this.channels; c++) {
      const hist = this.history[c];
      const x = planar[c];
      let pos = this.pos;
      for (let i = 0; i < n; i++) {
        const v = x[i];
        hist[pos] = v;
        hist[pos + TAPS] = v;
        pos = pos + 1 === TAPS ? 0 : pos + 1;
        // hist[pos .. pos+TAPS) now holds the last TAPS samples, oldest first. The sixteen in locals once for all the
        // branches, each branch's sum written out in the order of the loop it replaced (the same bits, compared over
        // five rates and channel counts in random chunks): 60 s of 48 kHz stereo took 800-890 ms with a loop over the
        // branches' arrays, 330-390 ms so (2026-12-02, the same machine and hour).
        const h0 = hist[pos], h1 = hist[pos + 1], h2 = hist[pos + 2], h3 = hist[pos + 3];
        const h4 = hist[pos + 4], h5 = hist[pos + 5], h6 = hist[pos + 6], h7 = hist[pos + 7];
        const h8 = hist[pos + 8], h9 = hist[pos + 9], h10 = hist[pos + 10], h11 = hist[pos + 11];
        const h12 = hist[pos + 12], h13 = hist[pos + 13], h14 = hist[pos + 14], h15 = hist[pos + 15];
        let peak = 0;
        for (let b = 0; b < bEnd; b += TAPS) {
          const acc =
            r[b] * h0 + r[b + 1] * h1 + r[b + 2] * h2 + r[b + 3] * h3 + r[b + 4] * h4 + r[b + 5] * h5 + r[b + 6] * h6 +
            r[b + 7] * h7 + r[b + 8] * h8 + r[b + 9] * h9 + r[b + 10] * h10 + r[b + 11] * h11 + r[b + 12] * h12 +
            r[b + 13] * h13 + r[b + 14] * h14 + r[b + 15] * h15;
          const a = acc < 0 ? -acc : acc;
          if (a > peak) peak = a;
        }
        if (peak > out[i]) out[i] = peak;
      }
      if (c === this.channels - 1) this.pos = pos;
    }
    for (let i = 0; i < n; i++) if (out[i] > this.maxSeen) this.maxSeen = out[i];
  }

  /** Largest oversampled absolute value so far (linear); 20·log10 of it is the true peak in dBTP. */
  maximum(): number {
    return this.maxSeen;
  }
}

/** dBTP (or dBFS) of a linear peak; −Infinity for 0. */
export function dbOf(linear: number): number {
  return 20 * Math.log10(linear);
}
