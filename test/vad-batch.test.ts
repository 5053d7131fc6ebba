// Speech detection for many streams (src/vad/batch.ts) and its parts: the gate (gate.ts), the per-stream framing and
// the silence-state rule (track.ts). Signals: a LibriSpeech utterance (read from its WAV, no ffmpeg) with pauses and
// noise as "input", and as "output" the same speech with the noise 34 dB down (what a denoiser leaves in pauses).
// Every stream's events are the same however its audio is chunked, whatever streams share its ticks, and however
// the runs are deferred; gated frames are not run, and the frame after a gap starts from the silence state.
import fs from 'node:fs';
import type * as ort from 'onnxruntime-node';
import { loadConfig } from '../src/config';
import { Decimator3 } from '../src/dsp/resample';
import { speechSourcePath, seededRandom } from '../src/audio/synthetic-noise';
import { VadBatch, type VadBatchOptions, type VadEvent } from '../src/vad/batch';
import { gated, VAD_KEPT_MIN_DB, VAD_SILENT_DBFS } from '../src/vad/gate';
import { VAD_DEFAULTS } from '../src/vad/options';
import { copyState, loadVadSession, runSequences, silenceState } from '../src/vad/silero';
import { VAD_FRAME, VAD_WINDOW } from '../src/vad/silero-graph';
import { runTracks, VadTrack } from '../src/vad/track';

const config = loadConfig();

/** The utterance at 48 kHz (its WAV: 16-bit mono, 44-byte header), without the digital silence around it. */
function speech48(): Float32Array {
  const b = fs.readFileSync(speechSourcePath()).subarray(44);
  const x = Float32Array.from({ length: b.length >> 1 }, (_, i) => b.readInt16LE(2 * i) / 32768);
  let first = -1;
  let last = 0;
  for (let i = 0; i < x.length; i++) {
    if (Math.abs(x[i]) < 1e-3) continue;
    if (first < 0) first = i;
    last = i;
  }
  return x.slice(first, last + 1);
}

/**
 * A "call" at `rate`: `lead` s of noise, the utterance, 2 s of noise, the utterance again, 1 s of noise; input = speech
 * + noise, output = speech + noise × 0.02 (−34 dB). Also where the utterances are (s).
 */
function call(rate: 16000 | 48000, lead: number, seed: number): { input: Float32Array; output: Float32Array; speech: Array<[number, number]> } {
  let s = speech48();
  if (rate === 16000) s = new Decimator3().process(s);
  const n = (sec: number) => Math.round(sec * rate);
  const len = n(lead) + s.length + n(2) + s.length + n(1);
  const clean = new Float32Array(len);
  clean.set(s, n(lead));
  clean.set(s, n(lead) + s.length + n(2));
  const r = seededRandom(seed);
  const input = new Float32Array(len);
  const output = new Float32Array(len);
  for (let i = 0; i < len; i++) {
    const noise = 0.01 * (r() + r() + r() - 1.5);
    input[i] = clean[i] + noise;
    output[i] = clean[i] + 0.02 * noise;
  }
  const a = lead;
  const b = lead + s.length / rate + 2;
  return { input, output, speech: [[a, a + s.length / rate], [b, b + s.length / rate]] };
}

describe('the gate (pure)', () => {
  const N = VAD_FRAME;
  const level = (dbfs: number) => N * Math.pow(10, dbfs / 10);
  test('a frame is gated when the output kept less than VAD_KEPT_MIN_DB of the input, or is under VAD_SILENT_DBFS', () => {
    expect(gated(level(-30), level(-30 - VAD_KEPT_MIN_DB + 0.1), N)).toBe(true);
    expect(gated(level(-30), level(-30 - VAD_KEPT_MIN_DB - 0.1), N)).toBe(false);
    expect(gated(level(-20), level(-20), N)).toBe(false);
    expect(gated(level(VAD_SILENT_DBFS - 0.5), level(VAD_SILENT_DBFS - 0.5), N)).toBe(true);
    expect(gated(level(VAD_SILENT_DBFS + 0.5), level(VAD_SILENT_DBFS + 0.5), N)).toBe(false);
    // Digital silence in and out: gated by the level, not an undefined ratio.
    expect(gated(0, 0, N)).toBe(true);
  });

  test('without the input only the level decides', () => {
    expect(gated(level(-40), null, N)).toBe(false);
    expect(gated(level(-80), null, N)).toBe(true);
  });
});

describe('speech detection for many streams', () => {
  let session: ort.InferenceSession;
  beforeAll(async () => {
    session = await loadVadSession(config.modelsDir);
  });

  /** One track, the whole signal in one pass: its events as VadBatch reports them. */
  async function onePass(x: { input: Float32Array; output: Float32Array }, rate: number): Promise<VadEvent[]> {
    const b = new VadBatch(session, { minRows: 1, maxWaitMs: 0 });
    b.open(1, { vad: VAD_DEFAULTS, rate, channels: 1 });
    return (await b.tick([{ id: 1, input: [x.input], output: [x.output], end: true }])).get(1) ?? [];
  }

  test('events where the speech is, decided after the minimum speech and the hangover', async () => {
    const x = call(16000, 1.5, 1);
    const events = await onePass(x, 16000);
    expect(events.map((e) => e.type)).toEqual(['speech_start', 'speech_end', 'speech_start', 'speech_end']);
    [x.speech[0][0], x.speech[0][1], x.speech[1][0], x.speech[1][1]].forEach((t, i) => {
      // A start a frame or two before the first loud frame is found; an end comes with the last frame above the lower
      // threshold (the utterance fades out over ~0.2 s).
      expect(Math.abs(events[i].at_ms - t * 1000)).toBeLessThan(300);
    });
    for (const e of events) {
      expect(e.at_ms % 32).toBe(0);
      const lag = e.decided_ms - e.at_ms;
      if (e.type === 'speech_start') expect(lag).toBeGreaterThanOrEqual(VAD_DEFAULTS.minSpeechMs);
      else expect(lag).toBeGreaterThanOrEqual(VAD_DEFAULTS.hangoverMs);
      expect(lag).toBeLessThan(VAD_DEFAULTS.minSpeechMs + VAD_DEFAULTS.hangoverMs + 64);
    }
  });

  test('gated frames are not run; the pauses are gated, the speech is not', async () => {
    const x = call(16000, 1.5, 2);
    const t = new VadTrack(session, { vad: VAD_DEFAULTS, rate: 16000, channels: 1, withInput: true });
    t.pushInput([x.input]);
    t.pushOutput([x.output]);
    t.endOutput();
    const counts = await runTracks([t]);
    const frames = Math.ceil(x.output.length / VAD_FRAME);
    expect(counts.rows + counts.gated).toBe(frames);
    // The noise-only stretches are gated; most of the speech is run.
    const speechS = x.speech[0][1] - x.speech[0][0] + x.speech[1][1] - x.speech[1][0];
    const pauseS = x.output.length / 16000 - speechS;
    expect((counts.gated * VAD_FRAME) / 16000).toBeGreaterThan(0.9 * pauseS);
    expect((counts.rows * VAD_FRAME) / 16000).toBeGreaterThan(0.7 * speechS);
    // Without the gate every frame is run; the decisions here are the same but for the ends, which the gate can bring
    // forward where the utterance's fading tail is gated.
    const all = new VadTrack(session, { vad: VAD_DEFAULTS, rate: 16000, channels: 1, withInput: true, gate: false });
    all.pushInput([x.input]);
    all.pushOutput([x.output]);
    all.endOutput();
    expect((await runTracks([all])).rows).toBe(frames);
    t.detector.finish();
    all.detector.finish();
    const gatedEvents = t.detector.drain().events;
    const allEvents = all.detector.drain().events;
    expect(gatedEvents.map((e) => e.type)).toEqual(allEvents.map((e) => e.type));
    gatedEvents.forEach((e, i) => {
      if (e.type === 'speech_start') expect(e.frame).toBe(allEvents[i].frame);
      else expect(allEvents[i].frame - e.frame).toBeGreaterThanOrEqual(0);
      expect(allEvents[i].frame - e.frame).toBeLessThanOrEqual(3);
    });
  });

  test('the frame after a gap runs from the silence state; a run of frames carries its own state', async () => {
    // Frames: 12 of speech (ungated), 5 silent (gated), 12 of speech again.
    const s = new Decimator3().process(speech48()).subarray(4000, 4000 + 12 * VAD_FRAME);
    const out = new Float32Array(29 * VAD_FRAME);
    out.set(s, 0);
    out.set(s, 17 * VAD_FRAME);
    const t = new VadTrack(session, { vad: VAD_DEFAULTS, rate: 16000, channels: 1, withInput: true });
    t.pushInput([out]);
    t.pushOutput([out]);
    const got: number[] = [];
    const { detector } = t;
    const push = detector.push.bind(detector);
    detector.push = (p) => {
      got.push(...Array.from(p));
      push(p);
    };
    await runTracks([t]);
    expect(got.length).toBe(29);
    expect(got.slice(12, 17)).toEqual([0, 0, 0, 0, 0]);
    expect(got.slice(0, 12).every((p) => p > 0)).toBe(true);
    // The second run: the same windows (64 samples of context from the gated frame before: zeros) from the silence state.
    const w = new Float32Array(12 * VAD_WINDOW);
    for (let f = 0; f < 12; f++) w.set(out.subarray((17 + f) * VAD_FRAME - 64, (18 + f) * VAD_FRAME), f * VAD_WINDOW);
    const [p2] = await runSequences(session, [{ windows: w, state: copyState(await silenceState(session)) }]);
    expect(got.slice(17)).toEqual(Array.from(p2));
    expect(Math.max(...got.slice(17))).toBeGreaterThan(0.5);
  });

  test('the attenuation limit\'s mix is undone for the gate: the same frames run as on the denoiser\'s own output', async () => {
    const x = call(16000, 1, 3);
    const dry = Math.pow(10, -12 / 20);
    const mixed = x.output.map((v, i) => dry * x.input[i] + (1 - dry) * v);
    const run = async (output: Float32Array, dryMix: number) => {
      const t = new VadTrack(session, { vad: VAD_DEFAULTS, rate: 16000, channels: 1, withInput: true, dryMix });
      t.pushInput([x.input]);
      t.pushOutput([output]);
      t.endOutput();
      return runTracks([t]);
    };
    const plain = await run(x.output, 0);
    expect((await run(mixed, dry)).gated).toBe(plain.gated);
    // Read as if unlimited, the mixed output keeps ≥ −12 dB of every frame: nothing but silence would be gated.
    expect((await run(mixed, 0)).gated).toBe(0);
  });

  test('chunked, batched and deferred any way: each stream gets the events of its one pass (16 and 48 kHz)', async () => {
    const streams = [
      { id: 7, rate: 16000 as const, x: call(16000, 0.7, 4) },
      { id: 8, rate: 48000 as const, x: call(48000, 1.1, 5) },
      { id: 9, rate: 16000 as const, x: call(16000, 2.3, 6) },
    ];
    const alone = await Promise.all(streams.map((s) => onePass(s.x, s.rate)));
    alone.forEach((e) => expect(e.length).toBe(4));
    const configs: VadBatchOptions[] = [
      { minRows: 1, maxWaitMs: 0 },
      { minRows: 32, maxWaitMs: 20 },
      { minRows: 1e6, maxWaitMs: 1e9 }, // only at the end
    ];
    const runs: number[] = [];
    for (const [k, opts] of configs.entries()) {
      const b = new VadBatch(session, opts);
      streams.forEach((s) => b.open(s.id, { vad: VAD_DEFAULTS, rate: s.rate, channels: 1 }));
      const got = new Map<number, VadEvent[]>(streams.map((s) => [s.id, []]));
      const pos = new Map<number, { i: number; o: number }>(streams.map((s) => [s.id, { i: 0, o: 0 }]));
      const r = seededRandom(100 + k);
      let now = 0;
      while ([...pos.values()].some((p, j) => p.o < streams[j].x.output.length)) {
        now += 2;
        // A random subset of streams sends a random amount; the output lags the input by up to 40 ms.
        const chunks = streams.flatMap((s) => {
          const p = pos.get(s.id)!;
          if (p.o >= s.x.output.length || r() < 0.3) return [];
          const lag = Math.round(r() * 0.04 * s.rate);
          const i1 = Math.min(s.x.input.length, p.i + Math.round((0.005 + 0.03 * r()) * s.rate));
          const o1 = i1 >= s.x.input.length ? s.x.output.length : Math.max(p.o, i1 - lag);
          const c = { id: s.id, input: [s.x.input.subarray(p.i, i1)], output: [s.x.output.subarray(p.o, o1)], end: o1 >= s.x.output.length };
          p.i = i1;
          p.o = o1;
          return [c];
        });
        for (const [id, e] of await b.tick(chunks, now)) got.get(id)!.push(...e);
      }
      streams.forEach((s, j) => expect(got.get(s.id)).toEqual(alone[j]));
      expect(b.size).toBe(0);
      runs.push(b.stats.runs);
      // A frame waits at most maxWaitMs plus one tick (2 ms here) unless the stream ends first.
      if (k === 1) expect(b.stats.maxWaitedMs).toBeLessThanOrEqual(opts.maxWaitMs + 2);
    }
    // Deferring makes fewer, larger runs.
    expect(runs[1]).toBeLessThan(runs[0] / 2);
    expect(runs[2]).toBeLessThan(runs[1] / 2);
  });

  test('flush() runs what waits, without new audio', async () => {
    const x = call(16000, 0.5, 8);
    const b = new VadBatch(session, { minRows: 1e6, maxWaitMs: 1e9 });
    b.open(1, { vad: VAD_DEFAULTS, rate: 16000, channels: 1 });
    // The first utterance and 1 s of the pause after it: its start and end are decided, but wait for a run.
    const n = Math.round((x.speech[0][1] + 1) * 16000);
    expect((await b.tick([{ id: 1, input: [x.input.subarray(0, n)], output: [x.output.subarray(0, n)] }], 0)).size).toBe(0);
    expect(b.stats.runs).toBe(0);
    const events = (await b.flush(1)).get(1)!;
    expect(events.map((e) => e.type)).toEqual(['speech_start', 'speech_end']);
    expect(b.stats.runs).toBeGreaterThan(0);
  });

  test('bad use is refused', async () => {
    const b = new VadBatch(session);
    b.open(1, { vad: VAD_DEFAULTS, rate: 16000, channels: 1 });
    expect(() => b.open(1, { vad: VAD_DEFAULTS, rate: 16000, channels: 1 })).toThrow(/already open/);
    await expect(b.tick([{ id: 2, output: [new Float32Array(10)] }])).rejects.toThrow(/unknown stream 2/);
    expect(() => b.open(3, { vad: VAD_DEFAULTS, rate: 22050, channels: 1 })).toThrow(/16 or 48 kHz/);
    // A failed tick does not block the next one.
    expect((await b.tick([{ id: 1, input: [new Float32Array(600)], output: [new Float32Array(600)] }])).size).toBe(0);
  });
});
