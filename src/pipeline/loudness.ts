// Loudness normalisation's decisions around the model (the `loudness_lufs` option): how much to lift a quiet input
// before the model, and the one gain after it that brings the cleaned audio to the target through the true-peak
// limiter (dry runs from the spool), within a budget past which the target is reported as not reached.
import type { FloatSpool } from '../audio/spool';
import { dbOf, gatedLoudness, lufsOf, LoudnessMeter } from '../dsp/loudness';
import { LoudnessNormalizer } from '../dsp/normalize';

/**
 * The models were trained on the DNS Challenge's synthesised mixtures, which are set to −35 … −15 dBFS RMS (−25
 * nominal). Below that range they take quiet speech for noise: on real recordings scaled to −42.5 and −50 LUFS they
 * removed speech with the noise (DNSMOS OVRL 0.1–0.5 lower than the same recordings at −25…−35; docs/api.md). With a
 * loudness target the output's level is ours to choose anyway, so an input quieter than the floor is lifted to the
 * nominal level before the model, and the gain after the model is smaller by as much.
 */
export const MODEL_INPUT_FLOOR_LUFS = -35;
export const MODEL_INPUT_NOMINAL_LUFS = -25;
/** The lift stops where the input's true peak would pass this (as a well-recorded file at that level would peak). */
const MODEL_INPUT_PEAK_DBTP = -1;

/**
 * The most loudness the limiter may take away (LU): the gain may exceed the one that reaches the target without a
 * limiter by this much, no more. It is the loudness-weighted mean gain reduction over the speech: up to a few dB the
 * limiter shaves peaks; at 6 dB it holds the speech itself down (its gain no longer recovers between syllables), and
 * on the speech measured each further dB of gain bought under half a LU of loudness (the curve saturates), so going on
 * trades a little loudness for a lot of distortion. −16 LUFS at −2 dBTP cost 0.1–5.5 LU on seven real recordings
 * (docs/api.md); −10 or −5 LUFS on speech would cost 20 LU and more, and are reported as not reached.
 */
export const MAX_LIMITER_COST_LU = 6;
/** The target counts as reached within this (LU), measured before encoding: lossy encoders move it a few tenths more. */
export const REACHED_TOLERANCE_LU = 0.5;
/** Headroom under the format's ceiling for what the limiter's peak estimate and the output resampler can miss. */
export const LIMITER_MARGIN_DB = 0.7;
/** Dry passes at most when the limiter acts (a secant search; 2–4 usually suffice). */
const MAX_DRY_PASSES = 6;
/** Dry passes stop once this close to the target (LU). */
const CONVERGED_LU = 0.05;

/** The gain (dB) to apply to the input before the model: 0 unless it is quieter than MODEL_INPUT_FLOOR_LUFS. */
export function modelInputGainDb(inputLufs: number | null, inputTruePeakDbtp: number): number {
  if (inputLufs === null || inputLufs >= MODEL_INPUT_FLOOR_LUFS) return 0;
  return Math.max(0, Math.min(MODEL_INPUT_NOMINAL_LUFS - inputLufs, MODEL_INPUT_PEAK_DBTP - inputTruePeakDbtp));
}

/** Block powers (BS.1770 400 ms blocks) after a gain of `gainDb`. */
export function scaledBlocks(blocks: Float64Array, gainDb: number): Float64Array {
  const k = Math.pow(10, gainDb / 10);
  return blocks.map((z) => z * k);
}

/**
 * The gain that brings audio with these block powers to `target` without a limiter. Not simply target − loudness: a
 * gain moves blocks across the −70 LUFS absolute gate, which moves the relative gate (a quiet cleaned file gained by
 * 30 dB read 1.5 LU under the sum). Solved on the block powers alone, no audio pass.
 */
export function linearGainFor(blocks: Float64Array, target: number, measured: number): number {
  let gain = target - measured;
  for (let i = 0; i < 8; i++) {
    const got = gatedLoudness(scaledBlocks(blocks, gain));
    if (got === null || Math.abs(target - got) < 0.005) break;
    gain += target - got;
  }
  return gain;
}

export interface NormalizePlan {
  spool: FloatSpool;
  sampleRate: number;
  channels: number;
  chunkFrames: number;
  target: number;
  /** Integrated loudness of the spooled audio and its block powers (the engine's output meter); null: silence. */
  measured: number | null;
  blocks: Float64Array;
  /** True peak of the spooled audio (linear). */
  peak: number;
  /** The format's ceiling less LIMITER_MARGIN_DB (dBTP). */
  ceilingDbtp: number;
  /** Throws when the run failed meanwhile (abort). */
  check(): void;
}

export interface GainChoice {
  gainDb: number;
  /** The loudness the chosen gain gives (before encoding); null for silence. */
  expected: number | null;
  reached: boolean;
}

/** Runs the limiter over the whole spool at `gainDb` without writing anything; returns the loudness it gives. */
async function dryRun(plan: NormalizePlan, gainDb: number): Promise<number | null> {
  const normalizer = new LoudnessNormalizer({ sampleRate: plan.sampleRate, channels: plan.channels, gainDb, ceilingDbtp: plan.ceilingDbtp });
  const meter = new LoudnessMeter(plan.sampleRate, plan.channels);
  for await (const chunk of plan.spool.read(plan.chunkFrames)) {
    plan.check();
    meter.push(normalizer.push(chunk));
  }
  meter.push(normalizer.flush());
  return meter.integrated();
}

/**
 * The one gain for the whole file. Without limiting it is solved on the block powers. When the limiter acts it takes
 * loudness away, more the more gain: dry runs measure how much, and a secant search (the loudness rises ever slower
 * with the gain) finds the gain that meets the target, up to MAX_LIMITER_COST_LU above the limiter-free gain.
 */
export async function chooseGain(plan: NormalizePlan): Promise<GainChoice> {
  const { target, measured } = plan;
  if (measured === null) return { gainDb: 0, expected: null, reached: false };
  const linear = linearGainFor(plan.blocks, target, measured);
  const linearExpected = gatedLoudness(scaledBlocks(plan.blocks, linear));
  if (!(plan.peak > 0) || dbOf(plan.peak) + linear <= plan.ceilingDbtp) {
    return { gainDb: linear, expected: linearExpected, reached: reached(linearExpected, target) };
  }
  const cap = linear + MAX_LIMITER_COST_LU;
  const tried: Array<{ gain: number; out: number }> = [];
  let gain = linear;
  for (let pass = 0; pass < MAX_DRY_PASSES; pass++) {
    const out = await dryRun(plan, gain);
    if (out === null) break;
    tried.push({ gain, out });
    if (Math.abs(target - out) < CONVERGED_LU || (out < target && gain >= cap)) break;
    let next = gain + (target - out);
    if (tried.length >= 2) {
      const a = tried[tried.length - 2];
      const slope = (out - a.out) / (gain - a.gain);
      // A flat stretch (slope near 0) would send the secant far off: step by the deficit over a floor slope instead.
      if (Number.isFinite(slope)) next = gain + (target - out) / Math.max(slope, 0.1);
    }
    next = Math.min(cap, next);
    if (Math.abs(next - gain) < 1e-3) break;
    gain = next;
  }
  if (tried.length === 0) return { gainDb: linear, expected: linearExpected, reached: reached(linearExpected, target) };
  // The closest run wins; the final pass repeats it exactly (the limiter and meter do not depend on chunking).
  const best = tried.reduce((b, t) => (Math.abs(target - t.out) < Math.abs(target - b.out) ? t : b));
  return { gainDb: best.gain, expected: best.out, reached: reached(best.out, target) };
}

function reached(loudness: number | null, target: number): boolean {
  return loudness !== null && Math.abs(loudness - target) <= REACHED_TOLERANCE_LU;
}

/**
 * `loudness=keep`: the input's speech loudness, to normalise the cleaned audio to. BS.1770 gating over the input's
 * blocks where the cleaned output holds speech (its blocks that pass its own absolute and relative gates), so the
 * noise the model removed, in pauses and under the speech, does not count: cleaned speech then sounds as loud as it
 * went in, where without a target it comes out a few LU quieter (the noise's energy is gone). Both block lists are
 * the engine's meters over time-aligned audio. null when the output holds nothing above the gates (silence).
 */
export function keepTarget(input: Float64Array, output: Float64Array): number | null {
  const outputLoudness = gatedLoudness(output);
  if (outputLoudness === null) return null;
  const speechGate = Math.max(-70, outputLoudness - 10);
  const n = Math.min(input.length, output.length);
  const speech: number[] = [];
  for (let i = 0; i < n; i++) if (output[i] > 0 && lufsOf(output[i]) > speechGate) speech.push(input[i]);
  return gatedLoudness(Float64Array.from(speech));
}
