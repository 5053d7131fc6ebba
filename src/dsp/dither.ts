// Dither for 16-bit PCM output (WAV, FLAC): a stream stage that adds a faint low-frequency noise before the
// encoders round to 16 bits.
//
// Why: the stronger chains (the residual gate of nsm-3/nsm-4) turn the residue between words down below one 16-bit
// step. Plain rounding then leaves digital silence broken by isolated ±1 LSB clicks whose pattern follows the signal
// (quantisation distortion); DNSMOS scored that 0.04–0.06 OVRL below the same audio in float. Dither makes the
// rounding error independent of the signal; putting the dither's own power below a few hundred hertz, where hearing
// is least sensitive (and where a 16 kHz file has no inaudible high band to hide it in), keeps it out of the speech
// band: flat TPDF dither changed nothing measurable and white noise of the same level cost OVRL, while this one
// recovers the float scores (docs/engine.md, "Output dither"). Level: ~1 LSB RMS (−90 dBFS), below the threshold of
// hearing at any sane playback gain.
//
// The noise is TPDF (difference of two uniforms) through a one-pole low-pass whose corner is fixed in hertz, so it is
// the same at every sample rate; each channel has its own deterministic generator, so a file always encodes to the
// same bytes and chunked processing equals one-pass processing.
import { toInt16 } from './pcm';

/** Dither RMS in 16-bit steps (1 = −90.3 dBFS). */
export const DITHER_RMS_LSB = 1;
/** Corner of the dither's one-pole low-pass, Hz. */
export const DITHER_CORNER_HZ = 270;

const LSB = 1 / 32768;

export class LowFrequencyDither {
  private readonly pole: number;
  private readonly gain: number;
  private readonly rng: Uint32Array;
  private readonly state: Float64Array;

  constructor(sampleRate: number, readonly channels: number, rmsLsb = DITHER_RMS_LSB, cornerHz = DITHER_CORNER_HZ) {
    this.pole = Math.exp((-2 * Math.PI * cornerHz) / sampleRate);
    // TPDF of two uniforms on [0, 1) has variance 1/6; the pole's power gain is 1 / (1 - pole²).
    this.gain = rmsLsb * LSB * Math.sqrt(6 * (1 - this.pole * this.pole));
    this.rng = Uint32Array.from({ length: channels }, (_, c) => (0x9e3779b9 ^ Math.imul(c + 1, 0x85ebca6b)) || 1);
    this.state = new Float64Array(channels);
  }

  /** New arrays: `planar` plus dither (non-finite samples stay non-finite; the encoders turn them into silence). */
  process(planar: Float32Array[]): Float32Array[] {
    return this.processInPlace(planar.map((x) => x.slice()));
  }

  /**
   * Dithers `planar` and rounds it to interleaved 16-bit little-endian PCM in one pass: the bytes of
   * encodeInt16(processInPlace(planar)) (the same float32 sums, the same rounding), without writing the arrays.
   */
  toInt16(planar: Float32Array[]): Buffer {
    const C = planar.length;
    const frames = planar[0]?.length ?? 0;
    const out = new Int16Array(frames * C);
    for (let c = 0; c < C; c++) {
      const x = planar[c];
      let r = this.rng[c];
      let s = this.state[c];
      const p = this.pole;
      const g = this.gain;
      for (let f = 0, k = c; f < frames; f++, k += C) {
        r ^= r << 13; r ^= r >>> 17; r ^= r << 5; r >>>= 0;
        s = p * s + g * (((r & 0xffff) - (r >>> 16)) / 65536);
        out[k] = toInt16(Math.fround(x[f] + s));
      }
      this.rng[c] = r;
      this.state[c] = s;
    }
    // Typed arrays are little-endian on the hosts the in-process WAV writer runs on (writesInProcess checks).
    return Buffer.from(out.buffer, 0, out.byteLength);
  }

  /** Adds the dither to `planar` itself and returns it (for callers that own the arrays: no copy, no garbage). */
  processInPlace(planar: Float32Array[]): Float32Array[] {
    for (let c = 0; c < planar.length; c++) {
      const x = planar[c];
      let r = this.rng[c];
      let s = this.state[c];
      const p = this.pole;
      const g = this.gain;
      for (let i = 0; i < x.length; i++) {
        // xorshift32; its two 16-bit halves are the two uniforms (on [0, 1)) of the TPDF sample.
        r ^= r << 13; r ^= r >>> 17; r ^= r << 5; r >>>= 0;
        s = p * s + g * (((r & 0xffff) - (r >>> 16)) / 65536);
        x[i] += s;
      }
      this.rng[c] = r;
      this.state[c] = s;
    }
    return planar;
  }
}
