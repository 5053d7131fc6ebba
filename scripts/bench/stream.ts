// Live-stream benchmark (`npm run bench -- --stream`): a real server (`node dist/src/server.js`, npm start's flags) on
// loopback, and in this process N WebSocket streams sending 20 ms frames of a real noisy recording in real time (one
// timer for all of them, phases spread over the 20 ms). For every output sample n it records the server-added
// latency: the time from sending the frame that holds input sample n + D (D = the delay the server declared in
// `ready`) to receiving sample n, 0 when that frame was not even sent yet; so a server that answered at once adds ~0. An underrun is a 20 ms output frame
// whose added latency exceeds UNDERRUN_MS (a player with a 3-frame jitter buffer would have gone silent).
// CPU per stream-second is the server's CPU (all threads and child processes, /proc) over the window divided by the streams and
// the window. RNNoise (@jitsi/rnnoise-wasm, 480-sample frames at 48 kHz) is timed in this process on the same frames
// for the side-by-side "streams per core". Optionally 4 clients post 10 s files to /denoise meanwhile.
// --stream-encoding pcm_s16le,mulaw (and --stream-rate 8000, --stream-rounds N) runs each level once per encoding, one
// after the other, in alternating order from round to round, and prints the paired ratio of CPU per stream-second
// (the machine's speed moves between runs: only figures taken side by side compare).
// --stream-vad runs each level without and with vad=true side by side (alternating order), prints the paired CPU
// ratio, and for each speech event its latency: arrival − the sending of the frame that holds its deciding audio
// (the input sample just before decided_ms), so the denoiser's delay, the VAD's batching and the network are in it.
// --stream-echo (pcm_s16le): the streams carry an echo reference (channels=2&echo_reference=last): the recording 3 s
// later as the reference, its echo (60 ms behind, -6 dB) added to the microphone, so the canceller works throughout;
// --stream-echo both runs each level without and with the reference side by side, as the encodings are.
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import WebSocket from 'ws';
import { pcm16WavHeader } from '../../src/audio/wav';
import { addedLatency, LatencyHistogram } from '../../src/cli/stream-latency';
import { LIVE_SAMPLE_BYTES, type LiveEncoding } from '../../src/inference/types';
import { treeCpuMs } from '../lib/proc';
import { startServer, stopServer, type Server } from './load';

export const UNDERRUN_MS = 60;
const FRAME_MS = 20;

export interface StreamLevel {
  model: string;
  encoding: LiveEncoding;
  /** The streams carried an echo reference (channels=2&echo_reference=last). */
  echo: boolean;
  rate: number;
  streams: number;
  seconds: number;
  /** Server-added latency per output sample, ms. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
  underruns: number;
  /** Output frames received in the window, all streams. */
  frames: number;
  cpuMsPerStreamSecond: number;
  streamsPerCore: number;
  /** /denoise calls completed by the file clients meanwhile (with --with-files). */
  fileCalls: number;
  /** This (client) process's event-loop delay p99 in the window, ms: how much of the latency may be the client's. */
  clientLoopP99: number;
  errors: string[];
  holds: boolean;
  /** vad=true: the speech events received in the window and their latency (ms; see the header). */
  vad?: boolean;
  events?: number;
  eventLatency?: { p50: number; p90: number; max: number };
}

interface Client {
  ws: WebSocket;
  delay: number;
  sendTimes: number[];
  outSamples: number;
  sent: number;
}

/** Mono samples of a real recording at `rate` (s16le, or ffmpeg's μ-law / A-law), looped as needed (the bench's input). */
export function loadSpeech(ffmpeg: string, file: string, rate: number, format = 's16le'): Buffer {
  const { execFileSync } = require('node:child_process') as typeof import('node:child_process');
  return execFileSync(ffmpeg, ['-v', 'error', '-i', file, '-ac', '1', '-ar', String(rate), '-f', format, '-'], { maxBuffer: 1 << 28 });
}

export async function runStreamLevel(
  server: Server,
  opts: { model: string; streams: number; seconds: number; rate: number; pcm: Buffer; encoding?: LiveEncoding; withFiles?: Buffer | null; vad?: boolean; echo?: boolean },
): Promise<StreamLevel> {
  const encoding = opts.encoding ?? 'pcm_s16le';
  const sampleBytes = LIVE_SAMPLE_BYTES[encoding];
  const frameSamples = (opts.rate * FRAME_MS) / 1000;
  // With an echo reference `pcm` holds two channels (microphone, reference) and the output one.
  const frameBytes = frameSamples * sampleBytes * (opts.echo ? 2 : 1);
  const hist = new LatencyHistogram();
  let underruns = 0;
  let frames = 0;
  let measuring = false;
  const errors: string[] = [];
  const eventMs: number[] = [];
  const url = `ws://127.0.0.1:${server.port}/v1/noise-suppressor/stream?model=${opts.model}&sample_rate=${opts.rate}&encoding=${encoding}${opts.vad ? '&vad=true' : ''}${opts.echo ? '&channels=2&echo_reference=last' : ''}`;
  const clients: Client[] = await Promise.all(
    Array.from({ length: opts.streams }, () =>
      new Promise<Client>((resolve, reject) => {
        const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${server.token}` }, perMessageDeflate: false });
        const c: Client = { ws, delay: 0, sendTimes: [], outSamples: 0, sent: 0 };
        ws.on('unexpected-response', (_q, res) => reject(new Error(`stream refused: ${res.statusCode}`)));
        ws.on('error', (err) => errors.push(err.message));
        ws.on('message', (data, isBinary) => {
          const now = performance.now();
          if (!isBinary) {
            const msg = JSON.parse(String(data)) as { type: string; latency_samples?: number; error?: { message: string }; decided_ms?: number };
            if (msg.decided_ms !== undefined && measuring) {
              const k = Math.floor((Math.max(1, Math.round((msg.decided_ms * opts.rate) / 1000)) - 1) / frameSamples);
              if (c.sendTimes[k] !== undefined) eventMs.push(now - c.sendTimes[k]);
            }
            if (msg.type === 'ready') {
              c.delay = msg.latency_samples ?? 0;
              resolve(c);
            } else if (msg.type === 'error') errors.push(msg.error?.message ?? 'error');
            return;
          }
          const n = (data as Buffer).length / sampleBytes;
          const a = c.outSamples;
          c.outSamples += n;
          if (!measuring) return;
          // Samples [a, a + n): sample s counts from the frame holding input sample s + delay (stream-latency.ts); a
          // frame not sent yet means the server added nothing (the declared delay covers the worst hop position).
          addedLatency(c.sendTimes, frameSamples, c.delay, a, n, now, (ms, samples) => {
            hist.add(ms, samples);
            if (ms > UNDERRUN_MS && samples >= frameSamples / 2) underruns++;
          });
          frames += n / frameSamples;
        });
      }),
    ),
  );
  // Real time: every stream sends one frame per 20 ms, phases spread evenly.
  const start = performance.now();
  const pcmFrames = Math.floor(opts.pcm.length / frameBytes);
  let stop = false;
  const tick = (): void => {
    if (stop) return;
    const now = performance.now();
    const elapsed = now - start;
    for (let i = 0; i < clients.length; i++) {
      const c = clients[i];
      const phase = (i * FRAME_MS) / clients.length;
      const due = Math.floor((elapsed - phase) / FRAME_MS) + 1;
      while (c.sent < due) {
        const k = c.sent % pcmFrames;
        c.sendTimes[c.sent] = performance.now();
        c.ws.send(opts.pcm.subarray(k * frameBytes, (k + 1) * frameBytes));
        c.sent++;
      }
    }
    setTimeout(tick, 1);
  };
  tick();
  let fileCalls = 0;
  const fileClients = opts.withFiles ? Array.from({ length: 4 }, () => postLoop(server, opts.withFiles!, () => stop, () => fileCalls++)) : [];
  await new Promise((r) => setTimeout(r, 2000)); // warm-up
  measuring = true;
  fileCalls = 0;
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const cpu0 = treeCpuMs(server.child.pid!);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, opts.seconds * 1000));
  const cpu1 = treeCpuMs(server.child.pid!);
  const window = (performance.now() - t0) / 1000;
  measuring = false;
  loop.disable();
  stop = true;
  await Promise.all(fileClients);
  await Promise.all(
    clients.map(
      (c) =>
        new Promise<void>((resolve) => {
          c.ws.on('close', () => resolve());
          c.ws.close();
        }),
    ),
  );
  const cpuPerStreamSecond = (cpu1 - cpu0) / (opts.streams * window);
  const level: StreamLevel = {
    model: opts.model,
    encoding,
    echo: !!opts.echo,
    rate: opts.rate,
    streams: opts.streams,
    seconds: Math.round(window * 10) / 10,
    p50: hist.percentile(50),
    p90: hist.percentile(90),
    p99: hist.percentile(99),
    max: Math.round(hist.max * 10) / 10,
    underruns,
    frames: Math.round(frames),
    cpuMsPerStreamSecond: Math.round(cpuPerStreamSecond * 100) / 100,
    streamsPerCore: Math.floor(1000 / cpuPerStreamSecond),
    fileCalls,
    clientLoopP99: Math.round(loop.percentile(99) / 1e5) / 10,
    errors: [...new Set(errors)].slice(0, 5),
    holds: false,
  };
  if (opts.vad) {
    const sorted = [...eventMs].sort((a, b) => a - b);
    const at = (q: number): number => (sorted.length ? Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] * 10) / 10 : NaN);
    Object.assign(level, { vad: true, events: sorted.length, eventLatency: { p50: at(0.5), p90: at(0.9), max: at(1) } });
  }
  level.holds = level.p50 <= 10 && level.p99 <= 30 && level.underruns === 0 && errors.length === 0;
  return level;
}

async function postLoop(server: Server, wav: Buffer, stopped: () => boolean, done: () => void): Promise<void> {
  const boundary = 'benchboundary';
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="clip.wav"\r\nContent-Type: audio/wav\r\n\r\n`);
  const body = Buffer.concat([head, wav, Buffer.from(`\r\n--${boundary}--\r\n`)]);
  const agent = new http.Agent({ keepAlive: true });
  while (!stopped()) {
    await new Promise<void>((resolve) => {
      const req = http.request(
        {
          host: '127.0.0.1', port: server.port, path: '/v1/noise-suppressor/denoise', method: 'POST', agent,
          headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': body.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 200) done();
            resolve();
          });
        },
      );
      req.on('error', () => resolve());
      req.end(body);
    });
  }
  agent.destroy();
}

/** RNNoise's CPU per stream-second in this process: frames of many streams, one state each, as a live server would. */
export async function rnnoiseCpuPerStreamSecond(pcm48: Buffer, streams = 32, seconds = 5): Promise<number> {
  const { loadRnnoiseModule } = await import('./baselines');
  const rn = await loadRnnoiseModule();
  const FRAME = 480;
  const states = Array.from({ length: streams }, () => rn._rnnoise_create());
  const inPtr = rn._malloc(FRAME * 4);
  const outPtr = rn._malloc(FRAME * 4);
  const samples = Math.floor(pcm48.length / 2);
  const frames = seconds * 100;
  const t0 = process.cpuUsage();
  for (let f = 0; f < frames; f++) {
    for (let s = 0; s < streams; s++) {
      const heap = rn.HEAPF32;
      const base = inPtr >> 2;
      const off = ((f * FRAME + s * 997) % (samples - FRAME)) * 2;
      for (let i = 0; i < FRAME; i++) heap[base + i] = pcm48.readInt16LE(off + 2 * i);
      rn._rnnoise_process_frame(states[s], outPtr, inPtr);
      const out = new Float32Array(FRAME);
      out.set(rn.HEAPF32.subarray(outPtr >> 2, (outPtr >> 2) + FRAME));
    }
  }
  const used = process.cpuUsage(t0);
  for (const st of states) rn._rnnoise_destroy(st);
  rn._free(inPtr);
  rn._free(outPtr);
  return (used.user + used.system) / 1000 / (streams * seconds);
}

export interface StreamBenchOptions {
  models: string[];
  levels: number[];
  seconds: number;
  withFiles: boolean;
  workers: number;
  ffmpeg: string;
  speechFile: string;
  /** The streams' encodings (default pcm_s16le); with two or more, each level runs once per encoding, side by side. */
  encodings?: LiveEncoding[];
  /** The streams' sample rate (default 16000). */
  rate?: number;
  /** Times the whole table is run (the encodings' order alternating); default 1. */
  rounds?: number;
  /** Each level without and with vad=true, side by side. */
  vadPairs?: boolean;
  /** Streams with an echo reference: only ('only'), or without and with side by side ('both'); pcm_s16le only. */
  echo?: 'only' | 'both';
  log(line: string): void;
}

/** ffmpeg's raw format for each stream encoding (the bench's input in that encoding). */
const RAW_FORMAT: Record<LiveEncoding, string> = { pcm_s16le: 's16le', pcm_f32le: 'f32le', mulaw: 'mulaw', alaw: 'alaw' };

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** The microphone (the recording plus the echo of the reference) and the reference (the recording 3 s later), interleaved s16. */
function withEchoReference(pcm: Buffer, rate: number): Buffer {
  const n = pcm.length / 2;
  const at = (i: number): number => pcm.readInt16LE(2 * (((i % n) + n) % n));
  const shift = 3 * rate;
  const delay = Math.round(0.06 * rate);
  const out = Buffer.alloc(4 * n);
  for (let i = 0; i < n; i++) {
    const mic = at(i) + 0.5 * at(i + shift - delay);
    out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(mic))), 4 * i);
    out.writeInt16LE(at(i + shift), 4 * i + 2);
  }
  return out;
}

/** The stream table: for each model, each stream count (each encoding side by side); then RNNoise. */
export async function runStreamBench(o: StreamBenchOptions): Promise<unknown> {
  const encodings = o.encodings ?? ['pcm_s16le'];
  const rate = o.rate ?? 16000;
  const rounds = o.rounds ?? 1;
  const inputs = Object.fromEntries(encodings.map((e) => [e, loadSpeech(o.ffmpeg, o.speechFile, rate, RAW_FORMAT[e])])) as Record<LiveEncoding, Buffer>;
  if (o.echo && (encodings.length > 1 || encodings[0] !== 'pcm_s16le')) throw new Error('--stream-echo runs pcm_s16le streams only');
  const echoInput = o.echo ? withEchoReference(inputs.pcm_s16le, rate) : null;
  // The variants run side by side at each level: the encodings, or the streams without and with an echo reference.
  const variants: Array<{ encoding: LiveEncoding; echo: boolean }> = !o.echo
    ? encodings.map((encoding) => ({ encoding, echo: false }))
    : o.echo === 'both'
      ? [{ encoding: 'pcm_s16le', echo: false }, { encoding: 'pcm_s16le', echo: true }]
      : [{ encoding: 'pcm_s16le', echo: true }];
  const pcm48 = loadSpeech(o.ffmpeg, o.speechFile, 48000);
  const fileWav = o.withFiles ? tenSecondWav(loadSpeech(o.ffmpeg, o.speechFile, 16000)) : null;
  const server = await startServer(o.workers);
  const rows: StreamLevel[] = [];
  try {
    o.log(`Live streams: ${os.cpus().length} cores, WORKERS=${o.workers}, 20 ms frames of ${path.basename(o.speechFile)} at ${rate / 1000} kHz (${encodings.join(', ')}${o.echo ? `, echo reference: ${o.echo}` : ''}) in real time, ${o.seconds} s per level${rounds > 1 ? `, ${rounds} rounds` : ''}${o.withFiles ? ', 4 clients posting 10 s files to /denoise meanwhile' : ''}.`);
    o.log('model     encoding  echo  streams  p50 ms  p90 ms  p99 ms  max ms  underruns  CPU ms/stream-s  streams/core  files  client loop p99 ms  holds');
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? variants : [...variants].reverse();
      for (const model of o.models) {
        for (const n of o.levels) {
          const level: StreamLevel[] = [];
          const vads = !o.vadPairs ? [false] : round % 2 === 0 ? [false, true] : [true, false];
          for (const [{ encoding, echo }, vad] of order.flatMap((v) => vads.map((x) => [v, x] as const))) {
            const pcm = echo ? echoInput! : inputs[encoding];
            const r = await runStreamLevel(server, { model, streams: n, seconds: o.seconds, rate, pcm, encoding, withFiles: fileWav, echo, vad });
            rows.push(r);
            level.push(r);
            o.log(
              `${model.padEnd(9)} ${encoding.padEnd(9)} ${(echo ? 'yes' : 'no').padEnd(4)} ${String(n).padStart(8)} ${r.p50.toFixed(2).padStart(7)} ${r.p90.toFixed(2).padStart(7)} ${r.p99.toFixed(2).padStart(7)} ${String(r.max).padStart(7)} ${String(r.underruns).padStart(10)} ${r.cpuMsPerStreamSecond.toFixed(2).padStart(16)} ${String(r.streamsPerCore).padStart(13)} ${String(r.fileCalls).padStart(6)} ${r.clientLoopP99.toFixed(1).padStart(19)}  ${r.holds ? 'yes' : 'no'}${vadNote(r)}${r.errors.length ? '  ' + r.errors.join('; ') : ''}`,
            );
          }
          if (level.every((r) => !r.holds && r.p99 > 200)) break; // past saturation: larger counts only take longer
        }
      }
    }
  } finally {
    await stopServer(server);
  }
  // Side by side: each variant's CPU per stream-second over the first one's, at the same level of the same round.
  const label = (v: { encoding: LiveEncoding; echo: boolean }): string => (v.echo ? `${v.encoding}+echo_reference` : v.encoding);
  const paired: Array<{ model: string; streams: number; encoding: string; cpuRatios: number[]; meanRatio: number; p99: number[]; p99Base: number[] }> = [];
  for (const variant of variants.slice(1)) {
    for (const model of o.models) {
      for (const n of o.levels) {
        const of = (v: { encoding: LiveEncoding; echo: boolean }): StreamLevel[] =>
          rows.filter((r) => r.model === model && r.streams === n && r.encoding === v.encoding && r.echo === v.echo && !r.vad);
        const base = of(variants[0]);
        const other = of(variant);
        if (base.length === 0 || base.length !== other.length) continue;
        const cpuRatios = other.map((r, i) => Math.round((r.cpuMsPerStreamSecond / base[i].cpuMsPerStreamSecond) * 1000) / 1000);
        paired.push({ model, streams: n, encoding: label(variant), cpuRatios, meanRatio: Math.round(mean(cpuRatios) * 1000) / 1000, p99: other.map((r) => r.p99), p99Base: base.map((r) => r.p99) });
      }
    }
  }
  if (o.vadPairs) {
    for (const model of o.models) {
      for (const n of o.levels) {
        const of = (v: boolean): StreamLevel[] => rows.filter((r) => r.model === model && r.streams === n && !!r.vad === v);
        const [off, on] = [of(false), of(true)];
        if (off.length === 0 || off.length !== on.length) continue;
        const ratios = on.map((r, i) => Math.round((r.cpuMsPerStreamSecond / off[i].cpuMsPerStreamSecond) * 1000) / 1000);
        o.log(`${model} ${n} streams: CPU per stream-second vad=true / without = ${ratios.join(', ')} (mean ${Math.round(mean(ratios) * 1000) / 1000}); event latency p50 ${on.map((r) => r.eventLatency?.p50).join(', ')} ms, p90 ${on.map((r) => r.eventLatency?.p90).join(', ')} ms, max ${on.map((r) => r.eventLatency?.max).join(', ')} ms.`);
      }
    }
  }
  for (const p of paired) {
    o.log(`${p.model} ${p.streams} streams: CPU per stream-second ${p.encoding} / ${label(variants[0])} = ${p.cpuRatios.join(', ')} (mean ${p.meanRatio}); p99 ${p.p99.join(', ')} ms against ${p.p99Base.join(', ')} ms.`);
  }
  const rnCpu = await rnnoiseCpuPerStreamSecond(pcm48);
  const rnPerCore = Math.floor(1000 / rnCpu);
  o.log(`RNNoise (WebAssembly, in-process, no server): ${rnCpu.toFixed(2)} CPU ms per stream-second = ${rnPerCore} streams per core in real time.`);
  const best: Record<string, number> = {};
  for (const r of rows) {
    const key = variants.length > 1 ? `${r.model} ${label(r)}` : r.model;
    if (r.holds) best[key] = Math.max(best[key] ?? 0, r.streams);
  }
  for (const [model, n] of Object.entries(best)) o.log(`${model}: largest count holding p50 <= 10 ms, p99 <= 30 ms, 0 underruns: ${n}.`);
  const ratio = rows.filter((r) => r.holds).map((r) => ({ model: r.model, encoding: r.encoding, streams: r.streams, vsRnnoise: Math.round((r.streamsPerCore / rnPerCore) * 100) / 100 }));
  return { rows, paired, rnnoise: { cpuMsPerStreamSecond: rnCpu, streamsPerCore: rnPerCore }, largestHolding: best, streamsPerCoreVsRnnoise: ratio };
}

function vadNote(r: StreamLevel): string {
  if (!r.vad || !r.eventLatency) return '';
  return `  vad: ${r.events} events, latency p50 ${r.eventLatency.p50} p90 ${r.eventLatency.p90} max ${r.eventLatency.max} ms`;
}

function tenSecondWav(pcm16k: Buffer): Buffer {
  const data = pcm16k.subarray(0, Math.min(pcm16k.length, 10 * 16000 * 2));
  return Buffer.concat([pcm16WavHeader(data.length, 16000, 1), data]);
}
