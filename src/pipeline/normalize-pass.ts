// Pass 2 of a loudness target: the spooled cleaned audio through the chosen gain and the true-peak limiter into the
// sink. Then the delivered file is decoded and measured, which is what the stats report: a lossy encoder moves
// loudness and true peak (Opus overshot the limiter's ceiling by up to 1.4 dB, MP3 read 0.5–0.7 LU quieter on
// far-field speech at −16 LUFS), and the limiter's 4× peak estimate reads up to 0.4 dB low on 16 kHz audio. A file
// that misses the target or the ceiling is encoded again with the difference made up.
import { dbOf, LoudnessMeter, TruePeakInterpolator } from '../dsp/loudness';
import { LoudnessNormalizer } from '../dsp/normalize';
import { chooseGain, LIMITER_MARGIN_DB, REACHED_TOLERANCE_LU, type NormalizePlan } from './loudness';

/** Encodes at most (the first and up to two corrections; one usually suffices). */
const MAX_ENCODES = 3;
/** A file this close to the target (LU) and under the ceiling is kept. */
const ENCODED_TOLERANCE_LU = 0.3;
/** Extra headroom (dB) taken on a re-encode beyond the overshoot seen, as the overshoot varies a little. */
const OVERSHOOT_MARGIN_DB = 0.3;
/** The rate the delivered file is decoded at to be measured: the true-peak estimate is 4× oversampled from there. */
export const MEASURE_RATE = 48000;

export interface SinkWriter {
  write(planar: Float32Array[]): Promise<void>;
  close(): Promise<void>;
}

export interface PassIo {
  /** Opens (or reopens, replacing the file) the output. */
  openSink(): Promise<SinkWriter>;
  /** Decodes the finished file (at MEASURE_RATE); chunks until null. */
  readOutput(): Promise<{ read(): Promise<Float32Array[] | null>; channels: number; finish(): Promise<void> }>;
}

export interface PassResult {
  /** Gain after the model, before the limiter (dB). */
  gainDb: number;
  /** Integrated loudness and true peak of the delivered file (null loudness: silence). */
  output: number | null;
  truePeak: number | null;
  reached: boolean;
}

/** Loudness and true peak of planar chunks as they go by. */
class Gauge {
  private readonly meter: LoudnessMeter;
  private readonly peak: TruePeakInterpolator;
  private scratch = new Float64Array(0);
  constructor(rate: number, channels: number) {
    this.meter = new LoudnessMeter(rate, channels);
    this.peak = new TruePeakInterpolator(rate, channels);
  }
  push(planar: Float32Array[]): void {
    const n = planar[0].length;
    if (n === 0) return;
    this.meter.push(planar);
    if (this.scratch.length < n) this.scratch = new Float64Array(n);
    this.peak.process(planar, this.scratch);
  }
  result(): { loudness: number | null; truePeak: number | null } {
    const p = this.peak.maximum();
    return { loudness: this.meter.integrated(), truePeak: p > 0 ? dbOf(p) : null };
  }
}

/** Writes the spool through gain and limiter into a fresh sink. */
async function writeOnce(plan: NormalizePlan, io: PassIo, gainDb: number, ceilingDbtp: number): Promise<void> {
  const normalizer = new LoudnessNormalizer({ sampleRate: plan.sampleRate, channels: plan.channels, gainDb, ceilingDbtp });
  const sink = await io.openSink();
  const write = (out: Float32Array[]): Promise<void> => (out[0].length === 0 ? Promise.resolve() : sink.write(out));
  for await (const chunk of plan.spool.read(plan.chunkFrames)) {
    plan.check();
    await write(normalizer.push(chunk));
  }
  await write(normalizer.flush());
  await sink.close();
}

async function measureOutput(io: PassIo, check: () => void) {
  const reader = await io.readOutput();
  const gauge = new Gauge(MEASURE_RATE, reader.channels);
  for (;;) {
    check();
    const chunk = await reader.read();
    if (chunk === null) break;
    gauge.push(chunk);
  }
  await reader.finish();
  return gauge.result();
}

/**
 * Normalises the spool into the output: `ceilingDbtp` is the format's ceiling (−1 dBTP, −2 for lossy formats), the
 * limiter aims LIMITER_MARGIN_DB under it for what its 4× peak estimate misses near the band edge.
 */
export async function normalizeInto(plan: Omit<NormalizePlan, 'ceilingDbtp'>, ceilingDbtp: number, io: PassIo): Promise<PassResult> {
  let limit = ceilingDbtp - LIMITER_MARGIN_DB;
  let aim = plan.target;
  let result: PassResult;
  for (let encode = 1; ; encode++) {
    const step: NormalizePlan = { ...plan, target: aim, ceilingDbtp: limit };
    const choice = await chooseGain(step);
    await writeOnce(step, io, choice.gainDb, limit);
    const file = await measureOutput(io, plan.check);
    result = { gainDb: choice.gainDb, output: file.loudness, truePeak: file.truePeak, reached: false };
    if (file.loudness === null) break;
    const over = file.truePeak === null ? 0 : file.truePeak - ceilingDbtp;
    const miss = plan.target - file.loudness;
    // Not reachable before encoding (the limiter's budget): a correction cannot help the loudness, only the peak.
    const loudnessFixable = choice.reached && Math.abs(miss) > ENCODED_TOLERANCE_LU;
    if ((over <= 0 && !loudnessFixable) || encode === MAX_ENCODES) break;
    if (over > 0) limit -= over + OVERSHOOT_MARGIN_DB;
    if (loudnessFixable) aim += miss;
  }
  result.reached = result.output !== null && Math.abs(result.output - plan.target) <= REACHED_TOLERANCE_LU;
  return result;
}
