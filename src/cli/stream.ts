// `nsm stream IN -o OUT [--realtime]`: a file (any format ffmpeg reads) or standard input played to a server's live
// stream endpoint (docs/streaming.md) and the denoised audio written as it comes back: a WAV file (16-bit PCM, or
// G.711 with --encoding mulaw|alaw), or the raw stream bytes on standard output with -o -. With --realtime the audio
// is sent in 20 ms frames at its own pace, as a microphone would, and the server-added latency is reported
// (stream-latency.ts: p50 / p99 / max over all output samples); without it, as fast as the server takes it. Every
// mistake and failure is one line on stderr (`nsm stream: ...`); the output appears only when the stream completed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { G711_WAV_HEADER_BYTES, g711WavHeader, pcm16WavHeader } from '../audio/wav';
import type { Config } from '../config';
import { MODEL_IDS } from '../inference/types';
import { existingRefusal, flag, parseCommandLine, sameFile, stringOf, usageLine, UsageError, type OptionSpec } from './args';
import { CONFIG_EXIT, configOrExplain } from './environment';
import { addedLatency, LatencyHistogram } from './stream-latency';

export const STREAM_EXIT = { ok: 0, failure: 1, usage: 2, badInput: 3, interrupted: 130 } as const;

/** The encodings nsm stream sends and writes, and their bytes per sample. */
const ENCODINGS: Record<string, number> = { pcm_s16le: 2, mulaw: 1, alaw: 1 };

export const STREAM_HELP = `nsm stream — denoise a file or standard input through a server's live stream (WebSocket)

Usage:
  nsm stream IN -o OUT [--realtime] [options]      IN: a file, or - for standard input (any format ffmpeg reads)

Options:
  -o, --output OUT          a .wav file, or - for the raw stream (s16le, or μ-law / A-law bytes) on standard output
  -m, --model M             ${MODEL_IDS.join(', ')} (default nsm-2)
  -r, --rate HZ             stream sample rate, 8000-48000 (default 16000); IN is resampled to it
  -c, --channels N          1 or 2 (default 1)
  -e, --encoding E          pcm_s16le (default), mulaw or alaw (G.711, as telephony carries it; the WAV holds G.711)
  -a, --attenuation-limit L maximum noise reduction in dB, 0-100
      --realtime            send 20 ms frames in real time and report the server-added latency
      --force               replace OUT if it exists (default: refuse, change nothing)
      --server URL          default NSM_URL, else http://localhost:8080
      --token TOKEN         default NSM_TOKEN
  -q, --quiet               no summary on stderr
Exit codes: 0 ok, 1 the server refused or the stream failed, 2 usage error (nothing written), 3 IN could not be
read, 130 interrupted (nothing written).
`;

const OPTIONS: Record<string, OptionSpec> = {
  output: { type: 'string', short: 'o' },
  model: { type: 'string', short: 'm' },
  rate: { type: 'string', short: 'r' },
  channels: { type: 'string', short: 'c' },
  encoding: { type: 'string', short: 'e' },
  'attenuation-limit': { type: 'string', short: 'a', aliases: ['attenuation-limit-db'] },
  realtime: { type: 'boolean' },
  force: { type: 'boolean' },
  server: { type: 'string' },
  token: { type: 'string' },
  quiet: { type: 'boolean', short: 'q' },
  help: { type: 'boolean', short: 'h' },
};

export interface StreamIo {
  out: NodeJS.WritableStream & { isTTY?: boolean };
  err: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}

/** A failure after the command line was accepted: one line, and the exit status. */
class StreamFailure extends Error {
  constructor(message: string, readonly code: number = STREAM_EXIT.failure) {
    super(message);
  }
}

type Options = ReturnType<typeof parseStreamArgs>;

export function parseStreamArgs(argv: string[], env: NodeJS.ProcessEnv) {
  const line = parseCommandLine(argv, OPTIONS, { once: true });
  if (line.positionals.length !== 1) throw new UsageError('give one input: a file, or - for standard input');
  const output = stringOf(line, 'output');
  if (!output) throw new UsageError('-o OUT is required (a .wav file, or - for the raw stream on standard output)');
  const input = line.positionals[0];
  if (output !== '-' && path.extname(output).toLowerCase() !== '.wav') throw new UsageError(`the output is a WAV file: name it .wav, or use -o - (got ${output})`);
  if (output !== '-' && input !== '-' && sameFile(output, input)) throw new UsageError(`output would overwrite the input ${input}`);
  const model = stringOf(line, 'model') ?? 'nsm-2';
  if (!(MODEL_IDS as readonly string[]).includes(model)) throw new UsageError(`unknown model "${model}" (expected one of ${MODEL_IDS.join(', ')})`);
  const rateText = stringOf(line, 'rate') ?? '16000';
  const rate = Number(rateText);
  if (!/^\d+$/.test(rateText) || rate < 8000 || rate > 48000) throw new UsageError(`--rate must be an integer from 8000 to 48000, got "${rateText}"`);
  const channelsText = stringOf(line, 'channels') ?? '1';
  if (channelsText !== '1' && channelsText !== '2') throw new UsageError(`--channels must be 1 or 2, got "${channelsText}"`);
  const encoding = stringOf(line, 'encoding') ?? 'pcm_s16le';
  if (!ENCODINGS[encoding]) throw new UsageError(`--encoding must be one of ${Object.keys(ENCODINGS).join(', ')}, got "${encoding}"`);
  const attenuation = stringOf(line, 'attenuation-limit');
  if (attenuation !== undefined) {
    const v = Number(attenuation);
    if (!Number.isFinite(v) || v < 0 || v > 100) throw new UsageError(`--attenuation-limit must be a number from 0 to 100, got "${attenuation}"`);
  }
  const server = (stringOf(line, 'server') ?? env.NSM_URL ?? 'http://localhost:8080').replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]/.test(server)) throw new UsageError(`--server must be an http(s) URL, got "${server}"`);
  const token = stringOf(line, 'token') ?? env.NSM_TOKEN ?? '';
  if (!token) throw new UsageError('no token: set NSM_TOKEN or pass --token');
  return {
    input, output, model, rate, channels: Number(channelsText), encoding, attenuation,
    realtime: flag(line, 'realtime'), force: flag(line, 'force'), server, token, quiet: flag(line, 'quiet'),
  };
}

export async function runStreamCli(argv: string[], io: StreamIo = { out: process.stdout, err: process.stderr, env: process.env }): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.out.write(STREAM_HELP);
    return STREAM_EXIT.ok;
  }
  const say = (message: string): void => void io.err.write(`nsm stream: ${message}\n`);
  let o: Options;
  try {
    o = parseStreamArgs(argv, io.env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err.write(usageLine('nsm stream', err.message, 'nsm stream --help') + '\n');
    return STREAM_EXIT.usage;
  }
  const config = configOrExplain((line) => io.err.write(line + '\n'), io.env);
  if (!config) return CONFIG_EXIT;
  // Everything that can be known before any work.
  if (o.input !== '-' && !fs.existsSync(o.input)) {
    say(`input not found: ${o.input}`);
    return STREAM_EXIT.badInput;
  }
  if (o.output === '-' && io.out.isTTY) {
    say('refusing to write audio to a terminal; redirect standard output or use -o FILE.wav');
    return STREAM_EXIT.usage;
  }
  if (o.output !== '-') {
    const existing = existingRefusal(o.output, o.force);
    if (existing) {
      say(existing);
      return STREAM_EXIT.usage;
    }
    if (!fs.existsSync(path.dirname(path.resolve(o.output)))) {
      say(`no such directory for ${o.output}`);
      return STREAM_EXIT.usage;
    }
  }
  try {
    const r = await stream(o, config, io);
    if (!o.quiet) {
      const lat = r.latency.samples > 0
        ? `; server-added latency p50 ${r.latency.percentile(50).toFixed(2)} ms, p99 ${r.latency.percentile(99).toFixed(2)} ms, max ${r.latency.max.toFixed(1)} ms`
        : '';
      const where = o.output === '-' ? 'stdout' : o.output;
      io.err.write(`wrote ${where} (from ${o.input === '-' ? 'stdin' : o.input}): ${r.seconds.toFixed(2)} s ${o.channels === 1 ? 'mono' : 'stereo'} ${o.rate} Hz ${o.encoding}, ` +
        `${o.model}, ${r.wallS.toFixed(2)} s, ${r.credits} credit${r.credits === 1 ? '' : 's'}, model delay ${r.delayMs} ms${lat}\n`);
    }
    return STREAM_EXIT.ok;
  } catch (err) {
    if (err instanceof StreamFailure) {
      say(err.message);
      return err.code;
    }
    say(`failed: ${(err as Error).message}`);
    return STREAM_EXIT.failure;
  }
}

interface Result {
  seconds: number;
  wallS: number;
  credits: number;
  delayMs: number;
  latency: LatencyHistogram;
}

/** A temporary name beside `target` (the final rename stays on one file system). */
function partialName(target: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.partial-${process.pid}`);
}

/** The server's refusal of the upgrade as one line: status, error type and message from the envelope. */
function refusalLine(status: number | undefined, body: string): string {
  try {
    const e = (JSON.parse(body) as { error?: { type?: string; message?: string } }).error;
    if (e?.type) return `refused: ${status} ${e.type}: ${e.message ?? ''}`.trim();
  } catch {
    // not the envelope
  }
  return `refused: ${status} ${body.replace(/\s+/g, ' ').trim().slice(0, 200)}`;
}

async function stream(o: Options, config: Config, io: StreamIo): Promise<Result> {
  const bytesPerSample = ENCODINGS[o.encoding];
  const frameBytesPer = bytesPerSample * o.channels;
  const frameSamples = Math.max(1, Math.round(o.rate / 50));
  const frameBytes = frameSamples * frameBytesPer;
  const rawFormat = o.encoding === 'pcm_s16le' ? 's16le' : o.encoding;
  // ffmpeg turns any input into the stream's samples; read from the moment it starts (stdin works live).
  const ff = spawn(config.ffmpegPath, ['-v', 'error', '-i', o.input === '-' ? 'pipe:0' : o.input, '-ac', String(o.channels), '-ar', String(o.rate), '-f', rawFormat, 'pipe:1'], {
    stdio: [o.input === '-' ? 'inherit' : 'ignore', 'pipe', 'pipe'],
  });
  let ffErr = '';
  ff.stderr!.on('data', (d: Buffer) => (ffErr = (ffErr + d.toString()).slice(-2000)));
  const ffExit = new Promise<number | null>((r) => ff.once('close', (code) => r(code)));
  const ffFailure = (): StreamFailure =>
    new StreamFailure(`could not read ${o.input === '-' ? 'stdin' : o.input}: ${ffErr.trim().split('\n').pop() || 'ffmpeg failed'}`, STREAM_EXIT.badInput);
  const input = pcmQueue(ff.stdout!);
  // Nothing is opened on the server for an input ffmpeg cannot read.
  if (!(await input.started()) && (await ffExit) !== 0) throw ffFailure();

  const target = o.output === '-' ? null : path.resolve(o.output);
  const partial = target ? partialName(target) : null;
  const headerBytes = o.encoding === 'pcm_s16le' ? 44 : G711_WAV_HEADER_BYTES;
  let ws: WebSocket | null = null;
  let sink: fs.WriteStream | null = null;
  const onAbort = (): void => {
    ws?.terminate();
    ff.kill();
  };
  io.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const q = new URLSearchParams({ model: o.model, sample_rate: String(o.rate), channels: String(o.channels), encoding: o.encoding });
    if (o.attenuation !== undefined) q.set('attenuation_limit_db', o.attenuation);
    const url = `${o.server.replace(/^http/, 'ws')}/v1/noise-suppressor/stream?${q}`;
    const socket = new WebSocket(url, { headers: { Authorization: `Bearer ${o.token}` }, perMessageDeflate: false });
    ws = socket;
    let sinkError: Error | null = null;
    if (partial) {
      // Opened here, not by the stream's own deferred open: a failure that comes first must find the file to remove
      // (an open still in flight would create it after the clean-up had looked).
      sink = fs.createWriteStream(partial, { fd: fs.openSync(partial, 'w') });
      sink.on('error', (err) => {
        sinkError ??= err;
        socket.terminate();
      });
      sink.write(Buffer.alloc(headerBytes)); // the header is written at the end, when the sizes are known
    }
    const out: NodeJS.WritableStream = sink ?? io.out;
    const sendTimes: number[] = [];
    const latency = new LatencyHistogram(0.05, 10_000);
    let outBytes = 0;
    let delay = 0;
    let credits = 0;
    let serverError: string | null = null;
    let ending = false;
    const closed = new Promise<{ code: number; reason: string }>((resolve) => {
      socket.on('close', (code, reason) => {
        if (!ending) ff.kill(); // the stream is over: stop reading the input
        resolve({ code, reason: reason.toString().slice(0, 100) });
      });
    });
    let connectError: Error | null = null;
    socket.on('error', (err) => (connectError ??= err)); // 'close' follows
    const opened = new Promise<void>((resolve, reject) => {
      socket.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body = (body + d.toString()).slice(0, 4000)));
        res.on('end', () => reject(new StreamFailure(refusalLine(res.statusCode, body))));
        res.on('error', () => reject(new StreamFailure(`refused: ${res.statusCode}`)));
      });
      void closed.then(({ code }) => {
        if (io.signal?.aborted) reject(new StreamFailure('interrupted', STREAM_EXIT.interrupted));
        else if (connectError && !serverError) reject(new StreamFailure(`cannot reach ${o.server}: ${connectError.message}`));
        else reject(new StreamFailure(serverError ?? `the server closed the connection before the stream started (${code})`));
      });
      socket.on('message', (data, isBinary) => {
        if (isBinary) {
          const buf = data as Buffer;
          const samples = buf.length / frameBytesPer;
          if (o.realtime) addedLatency(sendTimes, frameSamples, delay, outBytes / frameBytesPer, samples, performance.now(), (ms, n) => latency.add(ms, n));
          outBytes += buf.length;
          out.write(buf);
          return;
        }
        let msg: { type?: string; latency_samples?: number; stats?: { credits_charged?: number }; error?: { type?: string; message?: string } };
        try {
          msg = JSON.parse(String(data)) as typeof msg;
        } catch {
          return; // not the protocol's: ignored
        }
        if (msg.type === 'ready') {
          delay = Number(msg.latency_samples) || 0;
          resolve();
        } else if (msg.type === 'done') credits = msg.stats?.credits_charged ?? 0;
        else if (msg.type === 'error') serverError = `${msg.error?.type ?? 'error'}: ${msg.error?.message ?? ''}`;
      });
    });
    await opened;

    // Send: whole frames, paced by samples sent in real time (from `ready`), or as fast as the socket drains.
    const started = performance.now();
    let sentSamples = 0;
    let pending: Buffer = Buffer.alloc(0);
    const sendFrame = async (frame: Buffer): Promise<void> => {
      if (o.realtime) {
        const wait = started + (sentSamples * 1000) / o.rate - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      } else {
        while (socket.readyState === WebSocket.OPEN && socket.bufferedAmount > 1 << 20) await new Promise((r) => setTimeout(r, 5));
      }
      if (socket.readyState !== WebSocket.OPEN) return;
      sendTimes.push(performance.now());
      socket.send(frame);
      sentSamples += frame.length / frameBytesPer;
    };
    for (let chunk = await input.next(); chunk && socket.readyState === WebSocket.OPEN; chunk = await input.next()) {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      while (pending.length >= frameBytes && socket.readyState === WebSocket.OPEN) {
        await sendFrame(pending.subarray(0, frameBytes));
        pending = pending.subarray(frameBytes);
      }
    }
    const whole = pending.length - (pending.length % frameBytesPer);
    if (whole > 0) await sendFrame(pending.subarray(0, whole));
    const ffCode = await ffExit;
    if (io.signal?.aborted) throw new StreamFailure('interrupted', STREAM_EXIT.interrupted);
    if (ffCode !== 0 && socket.readyState === WebSocket.OPEN) throw ffFailure(); // (a stream that failed says so below)
    ending = true;
    if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: 'end' }));
    const { code, reason } = await closed;
    if (io.signal?.aborted) throw new StreamFailure('interrupted', STREAM_EXIT.interrupted);
    if (sinkError) throw new StreamFailure(`could not write ${o.output}: ${(sinkError as Error).message}`);
    if (code !== 1000 || serverError) {
      const why = connectError && code === 1006 ? `the connection broke (${(connectError as Error).message})` : `the stream closed with code ${code}${reason ? ` (${reason})` : ''}`;
      throw new StreamFailure(serverError ?? why);
    }

    if (sink && partial && target) {
      if (outBytes % 2 === 1) sink.write(Buffer.alloc(1)); // RIFF chunks are padded to an even size
      await new Promise<void>((resolve, reject) => sink!.end((err?: Error | null) => (err ? reject(err) : resolve())));
      const header = o.encoding === 'pcm_s16le' ? pcm16WavHeader(outBytes, o.rate, o.channels) : g711WavHeader(outBytes, o.rate, o.channels, o.encoding as 'mulaw' | 'alaw');
      const fd = fs.openSync(partial, 'r+');
      try { fs.writeSync(fd, header, 0, header.length, 0); } finally { fs.closeSync(fd); }
      if (!o.force && fs.existsSync(target)) throw new StreamFailure(`${o.output} appeared while streaming; not replaced`, STREAM_EXIT.usage);
      fs.renameSync(partial, target);
    }
    return {
      seconds: sentSamples / o.rate,
      wallS: (performance.now() - started) / 1000,
      credits,
      delayMs: Math.round((delay * 1000) / o.rate),
      latency,
    };
  } catch (err) {
    if (io.signal?.aborted && !(err instanceof StreamFailure && err.code === STREAM_EXIT.interrupted)) throw new StreamFailure('interrupted', STREAM_EXIT.interrupted);
    throw err;
  } finally {
    io.signal?.removeEventListener('abort', onAbort);
    if (ff.exitCode === null && ff.signalCode === null) ff.kill();
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      ws.on('error', () => undefined);
      ws.terminate();
    }
    if (sink && !sink.closed) sink.destroy();
    if (partial && fs.existsSync(partial)) fs.rmSync(partial, { force: true });
  }
}

/**
 * ffmpeg's output read from the moment it starts (the WebSocket handshake may take longer than a short file's
 * decoding), held until the sender takes it; ffmpeg is paused while more than a MiB waits.
 */
function pcmQueue(out: NodeJS.ReadableStream): { next(): Promise<Buffer | null>; started(): Promise<boolean> } {
  const chunks: Buffer[] = [];
  let queued = 0;
  let ended = false;
  let wake: (() => void) | null = null;
  out.on('data', (c: Buffer) => {
    chunks.push(c);
    queued += c.length;
    if (queued > 1 << 20) out.pause();
    wake?.();
  });
  out.on('end', () => {
    ended = true;
    wake?.();
  });
  out.on('error', () => {
    ended = true;
    wake?.();
  });
  const waitForAny = async (): Promise<void> => {
    while (chunks.length === 0 && !ended) await new Promise<void>((r) => (wake = r));
    wake = null;
  };
  return {
    /** True once there is audio; false when the output ended without any. */
    async started(): Promise<boolean> {
      await waitForAny();
      return chunks.length > 0;
    },
    async next(): Promise<Buffer | null> {
      await waitForAny();
      const c = chunks.shift() ?? null;
      if (c) {
        queued -= c.length;
        if (queued <= 1 << 19) out.resume();
      }
      return c;
    },
  };
}
