// `npm run bench -- --vad [--vad-quality-only | --vad-cost-only]`: voice-activity quality and cost (docs/speech.md).
//   Quality: frame F1 against speech labelled from clean references (vad-mix.ts), on the kit's 15 noisy/clean pairs as
//   recorded (83 % speech) and on call mixtures of the kit's clean speech and noises with pauses between utterances
//   (about half non-speech) at −5, 0, 5 and 20 dB SNR, 32 clips each. Systems: Silero v5 and v6 on the noisy input (a)
//   and on nsm-2's output (b), v6 on nsm-2's output with the shipped gate (src/vad/gate.ts; what ships), WebRTC's VAD
//   (c, modes 0–3) from Debian's libwebrtc-audio-processing through a small C program compiled here (skipped, with a
//   line saying so, when the library or cc is missing). Means with 95 % bootstrap CIs over clips, paired differences.
//   Cost: per frame (graph with Conv encoder as before, dense as shipped; alone and batched), and on live streams next
//   to nsm-2's live chain (vad-live.ts), as ratios.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { loadConfig } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/engine';
import type { InferenceEngine } from '../../src/inference/types';
import { VAD_BATCH_DEFAULTS } from '../../src/vad/batch';
import { SpeechDetector } from '../../src/vad/detector';
import { gated } from '../../src/vad/gate';
import { VAD_DEFAULTS } from '../../src/vad/options';
import { VadStream } from '../../src/vad/silero';
import { VAD_FRAME, VAD_FRAME_S } from '../../src/vad/silero-graph';
import { runTracks, VadTrack } from '../../src/vad/track';
import { decodeAudio } from '../lib/audio-io';
import { listClips } from '../lib/eval-kit';
import { evalDir } from '../lib/metrics';
import { bootstrapMean, bootstrapRatio, pairedDiff } from '../lib/stats';
import { convertSilero, SHIPPED_SILERO, type SileroVersion } from '../vad/silero';
import { callMixtures, GRID, kitMaterial, labelSpeech, MIX_RATE as RATE } from './vad-mix';
import { liveVadCost, type VadVariant } from './vad-live';

const CALL_SNRS = [-5, 0, 5, 20];
const CALLS_PER_SNR = 32;
/** The seed of the bench's call mixtures; the gate's settings were chosen on seed 1's (docs/speech.md). */
const CALL_SEED = 2;
const SHIPPED = `v6 on nsm-2 + gate, rule at ${VAD_DEFAULTS.threshold} (ships)`;
/** Silero's published threshold, for the rows that compare with it. */
const SILERO_THRESHOLD = 0.5;

/** Per 10 ms grid frame: the decision of the system frame holding its centre. */
function onGrid(decisions: ArrayLike<number>, hop: number, n: number): Uint8Array {
  return Uint8Array.from({ length: n }, (_, f) => {
    const t = Math.floor((f * GRID + GRID / 2) / hop);
    return t < decisions.length && decisions[t] ? 1 : 0;
  });
}

interface Score {
  f1: number;
  fa: number;
  miss: number;
}

function score(label: Uint8Array, dec: Uint8Array): Score {
  let tp = 0;
  let fp = 0;
  let fn = 0;
  let neg = 0;
  for (let i = 0; i < label.length; i++) {
    if (!label[i]) neg++;
    if (dec[i] && label[i]) tp++;
    else if (dec[i]) fp++;
    else if (label[i]) fn++;
  }
  const pos = label.length - neg;
  return { f1: (2 * tp) / Math.max(1, 2 * tp + fp + fn), fa: neg ? fp / neg : NaN, miss: pos ? fn / pos : 0 };
}

async function silero(session: ort.InferenceSession, x: Float32Array): Promise<Float32Array> {
  const v = new VadStream(session);
  const p = await v.push(x);
  return Float32Array.from([...p, ...(await v.flush())]);
}

/** The shipped rule's decision per VAD frame. */
function ruleFrames(probs: ArrayLike<number>, threshold = VAD_DEFAULTS.threshold): Uint8Array {
  const d = new SpeechDetector({ ...VAD_DEFAULTS, threshold }, VAD_FRAME_S);
  d.push(probs);
  d.finish();
  const out = new Uint8Array(probs.length);
  for (const s of d.drain().spans) if (s.speech) out.fill(1, s.from, Math.min(s.to, out.length));
  return out;
}

/** What ships: nsm-2's output and its input through a VadTrack (the gate; gated frames not run), the shipped rule. */
async function shipped(session: ort.InferenceSession, noisy: Float32Array, den: Float32Array, threshold = VAD_DEFAULTS.threshold): Promise<{ frames: Uint8Array; gatedShare: number }> {
  const t = new VadTrack(session, { vad: { ...VAD_DEFAULTS, threshold }, rate: RATE, channels: 1, withInput: true });
  t.pushInput([noisy]);
  t.pushOutput([den]);
  t.endOutput();
  const counts = await runTracks([t]);
  t.detector.finish();
  const frames = new Uint8Array(t.decided);
  for (const s of t.detector.drain().spans) if (s.speech) frames.fill(1, s.from, Math.min(s.to, frames.length));
  return { frames, gatedShare: counts.gated / Math.max(1, counts.gated + counts.rows) };
}

/** The gate's decision per frame from the signals (as gate.ts decides it in a track). */
function gateFrames(noisy: Float32Array, den: Float32Array, frames: number): Uint8Array {
  return Uint8Array.from({ length: frames }, (_, f) => {
    let e = 0;
    let x = 0;
    for (let i = f * VAD_FRAME; i < Math.min(den.length, (f + 1) * VAD_FRAME); i++) {
      e += den[i] * den[i];
      x += noisy[i] * noisy[i];
    }
    return gated(e, x, VAD_FRAME) ? 1 : 0;
  });
}

/** WebRTC's VAD (10 ms frames, 16 kHz) through Debian's libwebrtc-audio-processing: a small C program built here. */
function buildWebrtc(dir: string): string {
  const src = path.join(dir, 'webrtc-vad.c');
  fs.writeFileSync(
    src,
    `// stdin: 16-bit mono 16 kHz PCM; stdout: one '0'/'1' per 10 ms frame. The library ships no header: its C API is
// declared here as the WebRTC sources of that version declare it.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
typedef struct WebRtcVadInst VadInst;
VadInst* WebRtcVad_Create(void);
int WebRtcVad_Init(VadInst*);
int WebRtcVad_set_mode(VadInst*, int);
int WebRtcVad_Process(VadInst*, int, const int16_t*, size_t);
void WebRtcVad_Free(VadInst*);
int main(int argc, char** argv) {
  VadInst* v = WebRtcVad_Create();
  if (!v || WebRtcVad_Init(v) || WebRtcVad_set_mode(v, argc > 1 ? atoi(argv[1]) : 0)) return 2;
  int16_t buf[160];
  while (fread(buf, 2, 160, stdin) == 160) {
    int r = WebRtcVad_Process(v, 16000, buf, 160);
    if (r < 0) return 3;
    putchar(r ? '1' : '0');
  }
  WebRtcVad_Free(v);
  return 0;
}
`,
  );
  const exe = path.join(dir, 'webrtc-vad');
  const r = spawnSync('cc', ['-O2', '-o', exe, src, '-l:libwebrtc_audio_processing.so.1'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cannot build the WebRTC VAD baseline (apt-get install libwebrtc-audio-processing-dev): ${r.stderr || r.error}`);
  return exe;
}

function webrtc(exe: string, x: Float32Array, mode: number): Uint8Array {
  const pcm = Buffer.alloc(x.length * 2);
  for (let i = 0; i < x.length; i++) pcm.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(x[i] * 32767))), i * 2);
  const r = spawnSync(exe, [String(mode)], { input: pcm, maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`webrtc-vad exited ${r.status}`);
  return Uint8Array.from(r.stdout.toString('latin1'), (c) => (c === '1' ? 1 : 0));
}

async function denoise(engine: InferenceEngine, x: Float32Array): Promise<Float32Array> {
  const s = await engine.openStream({ model: 'nsm-2', channels: 1, attenuationLimitDb: 0 });
  const parts: Float32Array[] = [];
  for (let i = 0; i < x.length; i += RATE) parts.push((await s.push([x.slice(i, i + RATE)]))[0]);
  parts.push((await s.end())[0]);
  const y = new Float32Array(x.length);
  let o = 0;
  for (const p of parts) {
    y.set(p, o);
    o += p.length;
  }
  return y;
}

const fmt = (m: { mean: number; lo: number; hi: number }, d = 3) => `${m.mean.toFixed(d)} [${m.lo.toFixed(d)}, ${m.hi.toFixed(d)}]`;
const signed = (m: { mean: number; lo: number; hi: number }, d = 3) => `${m.mean >= 0 ? '+' : ''}${m.mean.toFixed(d)} [${m.lo >= 0 ? '+' : ''}${m.lo.toFixed(d)}, ${m.hi >= 0 ? '+' : ''}${m.hi.toFixed(d)}]`;

interface Clip {
  clean?: Float32Array;
  noisy: Float32Array;
  label: Uint8Array;
}

/** Every system's score on every clip of a set. */
async function scoreSet(
  clips: Clip[],
  sessions: Record<SileroVersion, ort.InferenceSession>,
  engine: InferenceEngine,
  exe: string | null,
): Promise<{ rows: Map<string, Score[]>; gatedShare: number }> {
  const rows = new Map<string, Score[]>();
  const add = (name: string, s: Score) => rows.set(name, [...(rows.get(name) ?? []), s]);
  let gatedShare = 0;
  for (const clip of clips) {
    const { noisy, label } = clip;
    const den = await denoise(engine, noisy);
    const grid = (frames: ArrayLike<number>) => onGrid(frames, VAD_FRAME, label.length);
    add('always speech', score(label, label.map(() => 1)));
    const probs: Record<string, Float32Array> = {};
    for (const v of ['v5', 'v6'] as SileroVersion[]) {
      for (const [input, x] of [['noisy', noisy], ['nsm-2', den]] as const) {
        const p = (probs[`${v} ${input}`] = await silero(sessions[v], x));
        add(`${v} on ${input}, rule at ${VAD_DEFAULTS.threshold}`, score(label, grid(ruleFrames(p))));
      }
    }
    const pn = probs['v6 noisy'];
    const pd = probs['v6 nsm-2'];
    add(`v6 on noisy, rule at ${SILERO_THRESHOLD}`, score(label, grid(ruleFrames(pn, SILERO_THRESHOLD))));
    add(`v6 on nsm-2, rule at ${SILERO_THRESHOLD}`, score(label, grid(ruleFrames(pd, SILERO_THRESHOLD))));
    add('v6 on noisy, frames p ≥ 0.5', score(label, grid(Array.from(pn, (q) => (q >= 0.5 ? 1 : 0)))));
    add('v6 on nsm-2, frames p ≥ 0.5', score(label, grid(Array.from(pd, (q) => (q >= 0.5 ? 1 : 0)))));
    add('v6 two passes, min(p noisy, p nsm-2)', score(label, grid(ruleFrames(pn.map((q, i) => Math.min(q, pd[i]))))));
    const gate = gateFrames(noisy, den, pd.length);
    add('v6 on nsm-2 + gate, every frame run', score(label, grid(ruleFrames(pd.map((q, i) => (gate[i] ? 0 : q))))));
    add(`v6 on nsm-2 + gate, rule at ${SILERO_THRESHOLD}`, score(label, grid((await shipped(sessions[SHIPPED_SILERO], noisy, den, SILERO_THRESHOLD)).frames)));
    const s = await shipped(sessions[SHIPPED_SILERO], noisy, den);
    gatedShare += s.gatedShare / clips.length;
    add(SHIPPED, score(label, grid(s.frames)));
    if (exe) {
      for (let m = 0; m < 4; m++) add(`webrtc mode ${m} on noisy`, score(label, onGrid(webrtc(exe, noisy, m), GRID, label.length)));
      add('webrtc mode 3 on nsm-2', score(label, onGrid(webrtc(exe, den, 3), GRID, label.length)));
    }
  }
  return { rows, gatedShare };
}

function report(title: string, clips: Clip[], result: { rows: Map<string, Score[]>; gatedShare: number }, log: (line: string) => void): Record<string, unknown> {
  const { rows } = result;
  const speechShare = clips.reduce((a, c) => a + c.label.reduce((x, y) => x + y, 0) / c.label.length, 0) / clips.length;
  log(`\nVAD quality, ${title}: ${clips.length} clips, speech ${(100 * speechShare).toFixed(0)} % of labelled frames, gate ${(100 * result.gatedShare).toFixed(0)} % of frames; mean [95 % CI]:`);
  log(`${'system'.padEnd(44)} ${'F1'.padEnd(22)} ${'false alarms'.padEnd(22)} missed speech`);
  const table: Record<string, unknown> = {};
  for (const [name, s] of rows) {
    const f1 = bootstrapMean(s.map((x) => x.f1));
    const fa = bootstrapMean(s.map((x) => x.fa));
    const miss = bootstrapMean(s.map((x) => x.miss));
    table[name] = { f1, fa, miss };
    log(`${name.padEnd(44)} ${fmt(f1).padEnd(22)} ${fmt(fa).padEnd(22)} ${fmt(miss)}`);
  }
  const f1s = (name: string) => rows.get(name)!.map((x) => x.f1);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const rule = `rule at ${VAD_DEFAULTS.threshold}`;
  const pairs: Array<[string, string]> = [
    [`v6 on noisy, ${rule}`, SHIPPED],
    [`v6 on noisy, rule at ${SILERO_THRESHOLD}`, SHIPPED],
    [`v6 on nsm-2, ${rule}`, SHIPPED],
    ['v6 on nsm-2 + gate, every frame run', SHIPPED],
    [`v6 on nsm-2 + gate, rule at ${SILERO_THRESHOLD}`, SHIPPED],
    ['v6 two passes, min(p noisy, p nsm-2)', SHIPPED],
    [`v6 on noisy, ${rule}`, `v6 on nsm-2, ${rule}`],
    [`v6 on noisy, rule at ${SILERO_THRESHOLD}`, `v6 on nsm-2, rule at ${SILERO_THRESHOLD}`],
    [`v5 on noisy, ${rule}`, `v5 on nsm-2, ${rule}`],
  ];
  if (rows.has('webrtc mode 0 on noisy')) {
    const best = [0, 1, 2, 3].map((m) => `webrtc mode ${m} on noisy`).reduce((a, b) => (mean(f1s(b)) > mean(f1s(a)) ? b : a));
    pairs.push([best, SHIPPED]);
  }
  log('paired F1 differences (b − a) [95 % CI], clips b wins:');
  const diffs: Record<string, unknown> = {};
  for (const [a, b] of pairs) {
    const d = pairedDiff(f1s(a), f1s(b));
    diffs[`${b} − ${a}`] = d;
    log(`  ${b} − ${a}: ${signed(d)}, ${d.wins}/${d.n}`);
  }
  return { clips: clips.length, speech_share: speechShare, gated_share: result.gatedShare, table, diffs };
}

export async function runVadBench(log: (line: string) => void = console.log, args: string[] = process.argv.slice(2)): Promise<Record<string, unknown>> {
  const config = loadConfig();
  const dir = evalDir();
  if (!dir) throw new Error('../shared/eval is missing: the VAD benchmark needs its noisy/clean pairs');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-vad-bench-'));
  const out: Record<string, unknown> = {};
  try {
    const sessions = {} as Record<SileroVersion, ort.InferenceSession>;
    const options = { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all' } as const;
    for (const v of ['v5', 'v6'] as SileroVersion[]) {
      const file = path.join(work, `silero_${v}.onnx`);
      fs.writeFileSync(file, convertSilero(v).bytes);
      sessions[v] = await ort.InferenceSession.create(file, options);
    }
    const convFile = path.join(work, 'silero_conv.onnx');
    fs.writeFileSync(convFile, convertSilero(SHIPPED_SILERO, 'conv').bytes);
    const conv = await ort.InferenceSession.create(convFile, options);
    const material = kitMaterial(dir);
    if (!args.includes('--vad-cost-only')) {
      let exe: string | null = null;
      try {
        exe = buildWebrtc(work);
      } catch (err) {
        log(`NOTE: ${(err as Error).message}; WebRTC rows skipped`);
      }
      const engine = await createInferenceEngine({ ...config, workers: 1 }, { warmUp: false });
      try {
        const recorded = listClips(dir).pairs.map((c) => {
          const clean = decodeAudio(c.clean!, RATE)[0];
          return { clean, noisy: decodeAudio(c.noisy, RATE)[0], label: labelSpeech(clean) };
        });
        out['as recorded'] = report('the 15 pairs as recorded', recorded, await scoreSet(recorded, sessions, engine, exe), log);
        const calls = callMixtures(material, { snrsDb: CALL_SNRS, perSnr: CALLS_PER_SNR, seed: CALL_SEED });
        for (const snr of CALL_SNRS) {
          const set = calls.filter((m) => m.snrDb === snr);
          out[`calls ${snr} dB`] = report(`call mixtures at ${snr} dB SNR`, set, await scoreSet(set, sessions, engine, exe), log);
        }
      } finally {
        await engine.close();
      }
    }
    if (!args.includes('--vad-quality-only')) out.cost = await costs(config.modelsDir, sessions[SHIPPED_SILERO], conv, material, log);
    return out;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * Per stream-frame CPU of the graph with the Conv encoder (before) and the dense one (shipped), one frame per run of
 * 1, 16, 64 streams, alternating; then the live-stream harness (vad-live.ts) at 20 and 100 streams.
 */
async function costs(
  modelsDir: string,
  dense: ort.InferenceSession,
  conv: ort.InferenceSession,
  material: ReturnType<typeof kitMaterial>,
  log: (line: string) => void,
): Promise<Record<string, unknown>> {
  const calls = callMixtures(material, { snrsDb: [0], perSnr: 16, seed: 77 }).map((m) => m.noisy);
  const x = calls[0];
  const perFrame: Record<string, number[]> = {};
  for (let round = 0; round < 3; round++) {
    for (const B of [1, 16, 64]) {
      for (const [name, session] of round % 2 ? ([['dense', dense], ['conv', conv]] as const) : ([['conv', conv], ['dense', dense]] as const)) {
        const streams = Array.from({ length: B }, () => new VadStream(session));
        const frames = Math.max(20, Math.round(3000 / B));
        const t0 = cpuMs();
        for (let t = 0; t < frames; t++) {
          const at = (t * VAD_FRAME) % (x.length - VAD_FRAME);
          const w = x.subarray(at, at + VAD_FRAME);
          await VadStream.runJoint(streams.map((s) => ({ stream: s, windows: s.windowsFor(w) })));
        }
        (perFrame[`${name}, ${B} streams per run`] ??= []).push(((cpuMs() - t0) * 1000) / (frames * B));
      }
    }
  }
  log('\nVAD CPU µs per stream-frame (32 ms, FFT front end + graph), one frame per run, 3 alternating rounds:');
  for (const [k, v] of Object.entries(perFrame)) log(`  ${k}: ${v.map((u) => u.toFixed(1)).join(' / ')}`);
  // Files: one stream, whole chunks (speech_segments / trim_silence), the gate on; next to nsm-2's file chain.
  const engine = await createInferenceEngine({ ...loadConfig(), workers: 1 }, { warmUp: false });
  const files: Record<'chain' | 'vad', number[]> = { chain: [], vad: [] };
  try {
    const audio = calls.slice(0, 2).reduce((a, b) => Float32Array.from([...a, ...b]));
    const den = await denoise(engine, audio);
    const seconds = audio.length / RATE;
    for (let round = 0; round < 6; round++) {
      for (const which of round % 2 ? (['vad', 'chain'] as const) : (['chain', 'vad'] as const)) {
        const t0 = cpuMs();
        if (which === 'chain') await denoise(engine, audio);
        else await shipped(dense, audio, den);
        files[which].push((cpuMs() - t0) / seconds);
      }
    }
  } finally {
    await engine.close();
  }
  const fileRatio = bootstrapRatio(files.chain, files.vad);
  log(
    `Files (one stream, 1 s chunks of the chain, the VAD on the whole output): nsm-2 chain ${files.chain.map((v) => v.toFixed(2)).join(' / ')} ms, ` +
      `VAD with the gate ${files.vad.map((v) => v.toFixed(2)).join(' / ')} ms per audio second; VAD / chain ${fmt({ mean: fileRatio.ratio, lo: fileRatio.lo, hi: fileRatio.hi })}`,
  );
  const every = { minRows: 1, maxWaitMs: 0 };
  const variants: VadVariant[] = [
    { name: 'Conv graph, every frame, run every tick', session: conv, batch: every, gate: false },
    { name: 'dense graph, every frame, run every tick', session: dense, batch: every, gate: false },
    { name: 'dense graph, gate, run every tick', session: dense, batch: every, gate: true },
    { name: 'dense graph, every frame, batched (32 / 20 ms)', session: dense, batch: VAD_BATCH_DEFAULTS, gate: false },
    { name: 'shipped: dense graph, gate, batched (32 / 20 ms)', session: dense, batch: VAD_BATCH_DEFAULTS, gate: true },
  ];
  const live: Record<string, unknown> = {};
  for (const streams of [20, 100]) {
    const opts = { streams, seconds: 5, tickMs: 2, rounds: 3 };
    const r = await liveVadCost(modelsDir, calls, variants, opts);
    live[`${streams} streams`] = r;
    log(`\nLive streams: ${streams} nsm-2 streams × 20 ms chunks, a tick every ${opts.tickMs} ms (${r.ticks} ticks), ${opts.rounds} rounds of ${opts.seconds} s of call audio;`);
    log(`CPU ms per stream-second: nsm-2 live chain ${r.chainMsPerStreamS.map((v) => v.toFixed(2)).join(' / ')}`);
    for (const v of variants) {
      const q = r.ratio[v.name];
      log(
        `  ${v.name.padEnd(50)} ${r.vadMsPerStreamS[v.name].map((u) => u.toFixed(2)).join(' / ')}  VAD / chain ${fmt({ mean: q.ratio, lo: q.lo, hi: q.hi })}` +
          `  (${r.rowsPerRun[v.name].toFixed(1)} frames per run, ${(100 * r.gatedShare[v.name]).toFixed(0)} % gated)`,
      );
    }
  }
  const conv64 = perFrame['conv, 64 streams per run'];
  const dense64 = perFrame['dense, 64 streams per run'];
  return { us_per_stream_frame: perFrame, dense_over_conv_64: bootstrapRatio(conv64, dense64), files: { ms_per_audio_s: files, ratio: fileRatio }, live };
}

if (require.main === module) {
  runVadBench().then(
    () => process.exit(0),
    (err) => {
      console.error(`vad bench failed: ${(err as Error).message}`);
      process.exit(1);
    },
  );
}
