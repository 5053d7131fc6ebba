// `npm run bench -- --vad`: voice-activity quality and cost (docs/speech.md).
//   Quality: frame F1 against speech labelled from the clean references of the kit's 15 noisy/clean pairs
//   (../shared/eval dns3-synthetic and pairs), as recorded and with 1.5 s of the clip's own noise added before and
//   after (the recordings are 83–100 % speech: F1 on them says little about false alarms). Systems: Silero v5 and v6
//   on the noisy input and on nsm-2's output, raw frames (p ≥ 0.5) and through the shipped decision rule; WebRTC's
//   VAD (modes 0–3) from Debian's libwebrtc-audio-processing through a small C program compiled here (skipped, with a
//   line saying so, when the library or cc is missing). Means with 95 % bootstrap CIs over clips, paired differences.
//   Cost: CPU per audio second of the VAD next to nsm-2's chain, alternating, and per frame alone / batched.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { loadConfig, type Config } from '../../src/config';
import { createInferenceEngine } from '../../src/inference/engine';
import type { InferenceEngine } from '../../src/inference/types';
import { SpeechDetector } from '../../src/vad/detector';
import { VAD_DEFAULTS } from '../../src/vad/options';
import { VadStream } from '../../src/vad/silero';
import { VAD_FRAME, VAD_FRAME_S } from '../../src/vad/silero-graph';
import { decodeAudio } from '../lib/audio-io';
import { listClips } from '../lib/eval-kit';
import { evalDir } from '../lib/metrics';
import { bootstrapMean, bootstrapRatio, pairedDiff } from '../lib/stats';
import { convertSilero, SHIPPED_SILERO, type SileroVersion } from '../vad/silero';

const RATE = 16000;
/** The label grid: 10 ms. */
const G = 160;
const LEAD_S = 1.5;

/**
 * Speech labels from the clean reference, one per 10 ms: a frame is speech when its energy is at least 12 dB above the
 * clip's floor (10th percentile of frame energies) and within 30 dB of its loud end (95th percentile); gaps under
 * 200 ms between speech frames are filled (pauses inside phrases), runs under 50 ms dropped.
 */
export function labelSpeech(clean: Float32Array): Uint8Array {
  const n = Math.floor(clean.length / G);
  const e = new Float64Array(n);
  for (let f = 0; f < n; f++) {
    let s = 0;
    for (let i = 0; i < G; i++) s += clean[f * G + i] ** 2;
    e[f] = 10 * Math.log10(s / G + 1e-12);
  }
  const sorted = Float64Array.from(e).sort();
  const thr = Math.max(sorted[Math.floor(0.1 * n)] + 12, sorted[Math.floor(0.95 * n)] - 30);
  const l = Uint8Array.from(e, (v) => (v >= thr ? 1 : 0));
  let last = -1;
  for (let f = 0; f < n; f++) {
    if (!l[f]) continue;
    if (last >= 0 && f - last - 1 < 20) l.fill(1, last + 1, f);
    last = f;
  }
  for (let f = 0; f < n; ) {
    if (!l[f]) {
      f++;
      continue;
    }
    let g = f;
    while (g < n && l[g]) g++;
    if (g - f < 5) l.fill(0, f, g);
    f = g;
  }
  return l;
}

/** The clip with `lead` seconds of its own noise (noisy − clean, looped with 50 ms crossfades) before and after. */
function extend(clean: Float32Array, noisy: Float32Array, lead: number): { clean: Float32Array; noisy: Float32Array } {
  const noise = noisy.map((v, i) => v - clean[i]);
  const pad = Math.round(lead * RATE);
  const total = clean.length + 2 * pad;
  const c = new Float32Array(total);
  c.set(clean, pad);
  const nz = new Float32Array(total);
  const X = 800;
  for (let pos = 0; pos < total; pos += noise.length - X) {
    for (let i = 0; i < noise.length && pos + i < total; i++) {
      const a = pos > 0 && i < X ? (Math.PI / 2) * (i / X) : Math.PI / 2;
      nz[pos + i] = nz[pos + i] * Math.cos(a) + noise[i] * Math.sin(a);
    }
  }
  return { clean: c, noisy: c.map((v, i) => v + nz[i]) };
}

/** Per 10 ms grid frame: the decision of the system frame holding its centre. */
function onGrid(decisions: ArrayLike<number>, hop: number, n: number): Uint8Array {
  return Uint8Array.from({ length: n }, (_, f) => {
    const t = Math.floor((f * G + G / 2) / hop);
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
function ruleFrames(probs: Float32Array): Uint8Array {
  const d = new SpeechDetector(VAD_DEFAULTS, VAD_FRAME_S);
  d.push(probs);
  d.finish();
  const out = new Uint8Array(probs.length);
  for (const s of d.drain().spans) if (s.speech) out.fill(1, s.from, Math.min(s.to, out.length));
  return out;
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

export async function runVadBench(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  const config = loadConfig();
  const dir = evalDir();
  if (!dir) throw new Error('../shared/eval is missing: the VAD benchmark needs its noisy/clean pairs');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-vad-bench-'));
  try {
    const sessions = {} as Record<SileroVersion, ort.InferenceSession>;
    for (const v of ['v5', 'v6'] as SileroVersion[]) {
      const file = path.join(work, `silero_${v}.onnx`);
      fs.writeFileSync(file, convertSilero(v).bytes);
      sessions[v] = await ort.InferenceSession.create(file, { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
    }
    let exe: string | null = null;
    try {
      exe = buildWebrtc(work);
    } catch (err) {
      log(`NOTE: ${(err as Error).message}; WebRTC rows skipped`);
    }
    const engine = await createInferenceEngine({ ...config, workers: 1 }, { warmUp: false });
    const quality: Record<string, unknown> = {};
    try {
      for (const variant of ['as recorded', `with ${LEAD_S} s of noise before and after`]) {
        const rows = new Map<string, Score[]>();
        const add = (name: string, s: Score) => rows.set(name, [...(rows.get(name) ?? []), s]);
        const clips = listClips(dir).pairs;
        let speechShare = 0;
        for (const clip of clips) {
          let clean = decodeAudio(clip.clean!, RATE)[0];
          let noisy = decodeAudio(clip.noisy, RATE)[0];
          if (variant !== 'as recorded') ({ clean, noisy } = extend(clean, noisy, LEAD_S));
          const den = await denoise(engine, noisy);
          const label = labelSpeech(clean);
          speechShare += label.reduce((a, b) => a + b, 0) / label.length / clips.length;
          add('always speech', score(label, label.map(() => 1)));
          for (const v of ['v5', 'v6'] as SileroVersion[]) {
            for (const [input, x] of [['noisy', noisy], ['nsm-2', den]] as const) {
              const p = await silero(sessions[v], x);
              add(`silero-${v} on ${input}, frames p≥0.5`, score(label, onGrid(Array.from(p, (q) => (q >= 0.5 ? 1 : 0)), VAD_FRAME, label.length)));
              add(`silero-${v} on ${input}, shipped rule`, score(label, onGrid(ruleFrames(p), VAD_FRAME, label.length)));
            }
          }
          if (exe) {
            for (let m = 0; m < 4; m++) add(`webrtc mode ${m} on noisy`, score(label, onGrid(webrtc(exe, noisy, m), G, label.length)));
            add('webrtc mode 3 on nsm-2', score(label, onGrid(webrtc(exe, den, 3), G, label.length)));
          }
        }
        log(`\nVAD quality, ${clips.length} clips ${variant} (speech ${(100 * speechShare).toFixed(0)} % of labelled frames); mean [95 % CI]:`);
        log(`${'system'.padEnd(40)} ${'F1'.padEnd(22)} ${'false alarms'.padEnd(22)} missed speech`);
        const table: Record<string, unknown> = {};
        for (const [name, s] of rows) {
          const f1 = bootstrapMean(s.map((x) => x.f1));
          const fa = bootstrapMean(s.map((x) => x.fa));
          const miss = bootstrapMean(s.map((x) => x.miss));
          table[name] = { f1, fa, miss };
          log(`${name.padEnd(40)} ${fmt(f1).padEnd(22)} ${fmt(fa).padEnd(22)} ${fmt(miss)}`);
        }
        const f1s = (name: string) => rows.get(name)!.map((x) => x.f1);
        const pairs: Array<[string, string]> = [];
        for (const v of ['v5', 'v6']) {
          for (const kind of ['frames p≥0.5', 'shipped rule']) pairs.push([`silero-${v} on noisy, ${kind}`, `silero-${v} on nsm-2, ${kind}`]);
        }
        pairs.push([`silero-v5 on nsm-2, shipped rule`, `silero-v6 on nsm-2, shipped rule`]);
        if (exe) {
          const bestWebrtc = [0, 1, 2, 3].map((m) => `webrtc mode ${m} on noisy`).reduce((a, b) => (mean(f1s(b)) > mean(f1s(a)) ? b : a));
          pairs.push([bestWebrtc, `silero-${SHIPPED_SILERO} on nsm-2, shipped rule`], [bestWebrtc, `silero-${SHIPPED_SILERO} on noisy, shipped rule`]);
        }
        log('paired F1 differences (b − a) [95 % CI], clips b wins:');
        const diffs: Record<string, unknown> = {};
        for (const [a, b] of pairs) {
          const d = pairedDiff(f1s(a), f1s(b));
          diffs[`${b} − ${a}`] = d;
          log(`  ${b} − ${a}: ${d.mean >= 0 ? '+' : ''}${fmt(d)}, ${d.wins}/${d.n}`);
        }
        quality[variant] = { speech_share: speechShare, table, diffs };
      }
      const cost = await costs(engine, sessions[SHIPPED_SILERO], log);
      return { quality, cost };
    } finally {
      await engine.close();
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * CPU per audio second of the VAD (this thread, the service's code: FFT front end + graph) and of nsm-2's chain (its
 * worker thread; process CPU counts every thread), 30 s of a real noisy clip each, alternating for `rounds`; then the
 * VAD per stream-frame run alone (1 frame per run, as a live tick would) and batched over 64 and 256 streams.
 */
async function costs(engine: InferenceEngine, session: ort.InferenceSession, log: (line: string) => void): Promise<Record<string, unknown>> {
  const dir = evalDir()!;
  const clips = listClips(dir).pairs.map((c) => decodeAudio(c.noisy, RATE)[0]);
  const x = new Float32Array(30 * RATE);
  for (let o = 0, k = 0; o < x.length; k++) {
    const c = clips[k % clips.length];
    x.set(c.subarray(0, Math.min(c.length, x.length - o)), o);
    o += c.length;
  }
  await denoise(engine, x.subarray(0, RATE * 5)); // warm-up
  await silero(session, x.subarray(0, RATE * 5));
  const vad: number[] = [];
  const dtln: number[] = [];
  for (let r = 0; r < 8; r++) {
    for (const which of r % 2 ? ['vad', 'dtln'] : ['dtln', 'vad']) {
      const t0 = cpuMs();
      if (which === 'vad') await silero(session, x);
      else await denoise(engine, x);
      (which === 'vad' ? vad : dtln).push((cpuMs() - t0) / 30);
    }
  }
  const ratio = bootstrapRatio(dtln, vad);
  log(`\nCPU per audio second (30 s, 8 alternating rounds): nsm-2 chain ${mean(dtln).toFixed(2)} ms, VAD ${mean(vad).toFixed(2)} ms; VAD / nsm-2 = ${fmt({ mean: ratio.ratio, lo: ratio.lo, hi: ratio.hi })}`);
  // Per stream-frame: alone (live: one frame per run) and batched.
  const perFrame: Record<string, number> = {};
  const available = Math.floor(x.length / VAD_FRAME);
  for (const B of [1, 16, 64, 256]) {
    const streams = Array.from({ length: B }, () => new VadStream(session));
    const frames = Math.max(20, Math.round(4000 / B));
    const t0 = cpuMs();
    for (let t = 0; t < frames; t++) {
      const at = (t % available) * VAD_FRAME;
      const w = x.subarray(at, at + VAD_FRAME);
      await VadStream.runJoint(streams.map((s) => ({ stream: s, windows: s.windowsFor(w) })));
    }
    perFrame[`batch ${B}, 1 frame per run`] = ((cpuMs() - t0) * 1000) / (frames * B);
  }
  const file = new VadStream(session);
  const t1 = cpuMs();
  const n = Math.floor(x.length / VAD_FRAME);
  await file.push(x.subarray(0, n * VAD_FRAME));
  perFrame['one stream, 30 s per call (files)'] = ((cpuMs() - t1) * 1000) / n;
  log('VAD CPU µs per stream-frame (32 ms of audio): ' + Object.entries(perFrame).map(([k, v]) => `${k} ${v.toFixed(1)}`).join('; '));
  return { vad_ms_per_audio_s: vad, nsm2_ms_per_audio_s: dtln, ratio, us_per_stream_frame: perFrame };
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
