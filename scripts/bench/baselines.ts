// Reference rows for the speed table: other denoisers on the same 48 kHz file, measured the same way as `nsm denoise`
// (a whole process from start to exit, pinned to one core when taskset exists):
//   ffmpeg afftdn   `ffmpeg -i IN -af afftdn OUT.wav` (the bundled ffmpeg's FFT denoiser, default settings);
//   RNNoise         the WebAssembly build in @jitsi/rnnoise-wasm (devDependency), 480-sample frames at 48 kHz, in a
//                   child process that reads and writes the WAV in-process (src/audio/wav.ts), so the row is the
//                   denoiser itself plus file I/O, like the others.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { WavReader, WavWriter } from '../../src/audio/wav';

export interface ProcessTiming {
  /** Wall-clock seconds of the whole process. */
  wall_s: number;
  /** user + system CPU seconds of the process and its children. */
  cpu_s: number;
}

/** Runs a command to completion; wall and CPU time from GNU time's format when available, else wall only. */
export function timeProcess(cmd: string, args: string[], opts: { oneCore: boolean; env?: NodeJS.ProcessEnv }): ProcessTiming {
  const pin = opts.oneCore && fs.existsSync('/usr/bin/taskset') ? ['/usr/bin/taskset', '-c', '0'] : [];
  const hasTime = fs.existsSync('/usr/bin/time');
  const full = [...(hasTime ? ['/usr/bin/time', '-f', '__time %e %U %S'] : []), ...pin, cmd, ...args];
  const t0 = performance.now();
  const r = spawnSync(full[0], full.slice(1), { encoding: 'utf8', env: opts.env ?? process.env, maxBuffer: 1 << 24 });
  const wall = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${(r.stderr || '').slice(-2000)}`);
  const m = /__time ([\d.]+) ([\d.]+) ([\d.]+)/.exec(r.stderr ?? '');
  return m ? { wall_s: Number(m[1]), cpu_s: Number(m[2]) + Number(m[3]) } : { wall_s: wall, cpu_s: NaN };
}

export function timeAfftdn(ffmpegPath: string, input: string, output: string, oneCore: boolean): ProcessTiming {
  return timeProcess(ffmpegPath, ['-hide_banner', '-nostdin', '-loglevel', 'error', '-i', input, '-af', 'afftdn', '-c:a', 'pcm_s16le', '-y', output], { oneCore });
}

/** `node <this file> --rnnoise IN OUT`: RNNoise over a 48 kHz WAV (mono or multi-channel, each channel its own state). */
export function timeRnnoise(input: string, output: string, oneCore: boolean): ProcessTiming {
  return timeProcess(process.execPath, [__filename, '--rnnoise', input, output], { oneCore });
}

interface RnnoiseModule {
  ready: Promise<unknown>;
  HEAPF32: Float32Array;
  _malloc(bytes: number): number;
  _free(ptr: number): void;
  _rnnoise_create(model?: number): number;
  _rnnoise_destroy(state: number): void;
  _rnnoise_process_frame(state: number, out: number, input: number): number;
}

export async function loadRnnoiseModule(): Promise<RnnoiseModule> {
  // An ES module (with the WebAssembly inlined): a real dynamic import, which TypeScript's CommonJS output would
  // otherwise turn into require().
  const importEsm = new Function('p', 'return import(p)') as (p: string) => Promise<{ default: () => RnnoiseModule }>;
  const file = require.resolve('@jitsi/rnnoise-wasm/dist/rnnoise-sync.js');
  const mod = (await importEsm(file)).default();
  await mod.ready;
  return mod;
}

async function rnnoiseMain(input: string, output: string): Promise<void> {
  const rn = await loadRnnoiseModule();
  const reader = await WavReader.open(input);
  if (!reader) throw new Error(`${input}: not a WAV this reader handles`);
  const { channels, sampleRate } = reader.info;
  if (sampleRate !== 48000) throw new Error(`RNNoise runs at 48 kHz; ${input} is ${sampleRate} Hz`);
  const FRAME = 480;
  const states = Array.from({ length: channels }, () => rn._rnnoise_create());
  const inPtr = rn._malloc(FRAME * 4);
  const outPtr = rn._malloc(FRAME * 4);
  const writer = await WavWriter.create(output, channels, sampleRate);
  for (;;) {
    const planar = await reader.read(48000);
    const n = planar[0].length;
    if (n === 0) break;
    const out = planar.map((ch) => new Float32Array(ch.length));
    for (let c = 0; c < channels; c++) {
      const x = planar[c];
      const y = out[c];
      for (let f = 0; f < n; f += FRAME) {
        const len = Math.min(FRAME, n - f);
        const heap = rn.HEAPF32; // re-read: a memory growth replaces the view
        const base = inPtr >> 2;
        for (let i = 0; i < FRAME; i++) heap[base + i] = i < len ? x[f + i] * 32768 : 0;
        rn._rnnoise_process_frame(states[c], outPtr, inPtr);
        const ob = outPtr >> 2;
        const h2 = rn.HEAPF32;
        for (let i = 0; i < len; i++) y[f + i] = h2[ob + i] / 32768;
      }
    }
    await writer.write(out);
  }
  await writer.close();
  await reader.close();
  for (const s of states) rn._rnnoise_destroy(s);
  rn._free(inPtr);
  rn._free(outPtr);
}

if (require.main === module && process.argv[2] === '--rnnoise') {
  rnnoiseMain(path.resolve(process.argv[3]), path.resolve(process.argv[4])).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
