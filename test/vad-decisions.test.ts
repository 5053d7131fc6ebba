// The decision rule (src/vad/detector.ts) on probability sequences, and the pause trimmer (src/vad/trim.ts) on
// signals with known pauses: lengths, the crossfade at a cut, bounded buffering, and independence from chunking.
import { SpeechDetector, type FrameSpan } from '../src/vad/detector';
import { SilenceTrimmer } from '../src/vad/trim';
import { type VadOptions } from '../src/vad/options';

const F = 0.032;
/** The rule's mechanics at Silero's published threshold (the shipped default is VAD_DEFAULTS). */
const RULE: VadOptions = { threshold: 0.5, minSpeechMs: 250, hangoverMs: 300 };
const seq = (...runs: Array<[number, number]>): number[] => runs.flatMap(([p, n]) => Array<number>(n).fill(p));

function run(probs: number[], opts: Partial<VadOptions> = {}, chunk = probs.length) {
  const d = new SpeechDetector({ ...RULE, ...opts }, F);
  const events: ReturnType<SpeechDetector['drain']>['events'] = [];
  const spans: FrameSpan[] = [];
  for (let i = 0; i < probs.length; i += chunk) {
    d.push(probs.slice(i, i + chunk));
    const got = d.drain();
    events.push(...got.events);
    spans.push(...got.spans);
  }
  d.finish();
  const last = d.drain();
  events.push(...last.events);
  spans.push(...last.spans);
  return { events, spans };
}

describe('speech decision rule', () => {
  test('hysteresis: starts at the threshold, continues down to threshold − 0.15, ends after the hangover', () => {
    // 10 frames silent, 20 speech (0.9), 5 at 0.4 (above 0.35: still speech), 15 silent.
    const { events } = run(seq([0.1, 10], [0.9, 20], [0.4, 5], [0.1, 15]));
    expect(events.map((e) => [e.type, e.frame])).toEqual([
      ['speech_start', 10],
      ['speech_end', 35],
    ]);
    // Decided after min speech (250 ms → 8 frames) and after the hangover (300 ms → 10 frames below 0.35).
    expect(events[0].decidedAt).toBe(10 + 8 - 1);
    expect(events[1].decidedAt).toBe(34 + 10);
  });

  test('a pause shorter than the hangover does not split speech; a longer one does', () => {
    const short = run(seq([0.9, 20], [0.05, 9], [0.9, 20], [0.05, 20]));
    expect(short.events.map((e) => e.type)).toEqual(['speech_start', 'speech_end']);
    const long = run(seq([0.9, 20], [0.05, 12], [0.9, 20], [0.05, 20]));
    expect(long.events.map((e) => [e.type, e.frame])).toEqual([
      ['speech_start', 0],
      ['speech_end', 20],
      ['speech_start', 32],
      ['speech_end', 52],
    ]);
    // Per call: a longer hangover joins them again.
    expect(run(seq([0.9, 20], [0.05, 12], [0.9, 20], [0.05, 20]), { hangoverMs: 500 }).events).toHaveLength(2);
  });

  test('runs shorter than the minimum speech duration are dropped; the threshold is per call', () => {
    expect(run(seq([0.05, 10], [0.9, 5], [0.05, 30])).events).toEqual([]);
    expect(run(seq([0.05, 10], [0.9, 5], [0.05, 30]), { minSpeechMs: 100 }).events).toHaveLength(2);
    expect(run(seq([0.05, 10], [0.6, 20], [0.05, 30]), { threshold: 0.7 }).events).toEqual([]);
  });

  test('speech running at the end is closed; spans cover every frame once, in order, whatever the chunking', () => {
    const probs = seq([0.1, 7], [0.8, 30], [0.2, 3], [0.95, 10], [0.1, 40], [0.7, 9], [0.3, 4], [0.9, 25]);
    const whole = run(probs);
    expect(whole.events[whole.events.length - 1]).toMatchObject({ type: 'speech_end', frame: probs.length });
    let at = 0;
    for (const s of whole.spans) {
      expect(s.from).toBe(at);
      expect(s.to).toBeGreaterThan(s.from);
      at = s.to;
    }
    expect(at).toBe(probs.length);
    // Spans may come split differently (drained at other times): compare the labels they give each frame.
    const labelsOf = (spans: FrameSpan[]) => spans.flatMap((s) => Array<boolean>(s.to - s.from).fill(s.speech));
    for (const chunk of [1, 3, 17]) {
      const got = run(probs, {}, chunk);
      expect(got.events).toEqual(whole.events);
      expect(labelsOf(got.spans)).toEqual(labelsOf(whole.spans));
    }
  });
});

/** Planar chunks of a signal, the trimmer's output joined. */
function trim(x: Float32Array, labels: Array<[number, boolean]>, maxPauseS: number, chunk: number, rate = 16000) {
  const t = new SilenceTrimmer(1, rate, maxPauseS, 0.01);
  const out: Float32Array[] = [];
  let li = 0;
  for (let i = 0; i < x.length; i += chunk) {
    t.pushAudio([x.slice(i, i + chunk)]);
    // Labels arrive late, as the detector gives them: those ending before this chunk's start.
    while (li < labels.length && labels[li][0] <= i) t.label(labels[li][0], labels[li++][1]);
    out.push(t.take()[0]);
  }
  for (; li < labels.length; li++) t.label(labels[li][0], labels[li][1]);
  out.push(t.finish()[0]);
  const y = new Float32Array(out.reduce((n, o) => n + o.length, 0));
  let o = 0;
  for (const part of out) {
    y.set(part, o);
    o += part.length;
  }
  return { y, removed: t.removed };
}

describe('pause trimmer', () => {
  const R = 16000;
  // 1 s "speech" (a ramp, so positions are recognisable), 3 s pause (a 437 Hz tone: the 2.5 s cut is 1092.5 of its
  // periods, so a hard cut would flip its phase), 1 s speech, 0.3 s pause.
  const x = new Float32Array(5.3 * R);
  for (let i = 0; i < x.length; i++) {
    const speech = i < R || (i >= 4 * R && i < 5 * R);
    x[i] = speech ? 0.5 + (i % 1000) / 4000 : 0.2 * Math.sin((2 * Math.PI * 437 * i) / R);
  }
  const labels: Array<[number, boolean]> = [[R, true], [4 * R, false], [5 * R, true], [x.length, false]];

  test('a pause longer than the bound becomes the bound; shorter ones and speech pass unchanged', () => {
    const { y, removed } = trim(x, labels, 0.5, 4000);
    expect(removed).toBe(3 * R - 0.5 * R);
    expect(y.length).toBe(x.length - removed);
    expect(Array.from(y.subarray(0, R))).toEqual(Array.from(x.subarray(0, R))); // speech before
    const after = y.subarray(R + 0.5 * R);
    expect(Array.from(after)).toEqual(Array.from(x.subarray(4 * R))); // speech after, then the short pause as it was
    // The pause keeps its first quarter second and its last quarter second (the fade straddles the join).
    expect(Array.from(y.subarray(R, R + 0.25 * R - 160))).toEqual(Array.from(x.subarray(R, R + 0.25 * R - 160)));
  });

  test('the cut is an equal-power crossfade: no step, where a hard cut would jump', () => {
    const { y } = trim(x, labels, 0.5, 4000);
    const cut = R + 0.25 * R - 160; // where the crossfade starts
    const step = (a: Float32Array, from: number, to: number): number => {
      let m = 0;
      for (let i = from; i < to; i++) m = Math.max(m, Math.abs(a[i + 1] - a[i]));
      return m;
    };
    const toneStep = 0.2 * 2 * Math.sin((Math.PI * 437) / R); // the tone's own largest sample-to-sample change
    expect(step(y, cut - 10, cut + 170)).toBeLessThan(toneStep * 1.6);
    // A hard cut at the same place: the tone's phase jumps by half a period.
    const hard = new Float32Array([...x.subarray(cut - 10, cut + 80), ...x.subarray(cut + 80 + 2.5 * R, cut + 170 + 2.5 * R)]);
    expect(step(hard, 0, hard.length - 1)).toBeGreaterThan(toneStep * 3);
  });

  test('the same output whatever the chunking and however late the labels; buffering bounded by the bound', () => {
    const a = trim(x, labels, 0.5, 4000);
    for (const chunk of [1000, 777, 30000]) expect(Array.from(trim(x, labels, 0.5, chunk).y)).toEqual(Array.from(a.y));
    // A 10-minute pause with the bound at 0.5 s: 0.5 s out, nothing else kept.
    const t = new SilenceTrimmer(1, R, 0.5, 0.01);
    t.label(R * 600, false);
    let out = 0;
    for (let i = 0; i < 600; i++) {
      t.pushAudio([new Float32Array(R).fill(0.001)]);
      out += t.take()[0].length;
    }
    out += t.finish()[0].length;
    expect(out).toBe(0.5 * R);
    expect(t.removed).toBe(600 * R - 0.5 * R);
  });
});
