// `nsm stream IN -o OUT [--realtime]`: a file (any format ffmpeg reads) or standard input played to a server's live
// stream endpoint (docs/streaming.md) and the denoised audio written as it comes back: a WAV file, or raw PCM on
// standard output with -o -. With --realtime the audio is sent in 20 ms frames at its own pace, as a microphone
// would, and the server-added latency is reported (p50 / p99 / max); without it, as fast as the server takes it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { pcm16WavHeader } from '../audio/wav';
import { loadConfig } from '../config';

const USAGE = `nsm stream — denoise a file or standard input through a server's live stream (WebSocket)

Usage:
  nsm stream IN -o OUT [--realtime] [options]      IN: a file, or - for standard input (any format ffmpeg reads)

Options:
  -o, --output OUT          a .wav file, or - for raw PCM (s16le) on standard output
  -m, --model M             nsm-1, nsm-2, nsm-3, nsm-4, nsm-2-hd (default nsm-2)
  -r, --rate HZ             stream sample rate, 8000-48000 (default 16000); IN is resampled to it
  -c, --channels N          1 or 2 (default 1)
  -a, --attenuation-limit L maximum noise reduction in dB, 0-100
      --realtime            send 20 ms frames in real time and report the server-added latency
      --server URL          default NSM_URL, else http://localhost:8080
      --token TOKEN         default NSM_TOKEN
  -q, --quiet               no progress or summary on stderr
Exit codes: 0 ok, 1 the stream failed, 2 usage error.
`;

class UsageError extends Error {}

interface Io {
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
}

export async function runStreamCli(argv: string[], io: Io = { out: process.stdout, err: process.stderr, env: process.env }): Promise<number> {
  let opts: ReturnType<typeof parse>;
  try {
    opts = parse(argv, io.env);
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.err.write(`nsm stream: ${(err as Error).message} (see nsm stream --help)\n`);
      return 2;
    }
    throw err;
  }
  if (opts.help) {
    io.out.write(USAGE);
    return 0;
  }
  try {
    const stats = await stream(opts, io);
    if (!opts.quiet) {
      const lat = stats.latency.length
        ? `; server-added latency p50 ${pct(stats.latency, 50).toFixed(1)} ms, p99 ${pct(stats.latency, 99).toFixed(1)} ms, max ${pct(stats.latency, 100).toFixed(1)} ms`
        : '';
      io.err.write(`nsm stream: ${stats.seconds.toFixed(2)} s of audio in ${stats.wallS.toFixed(2)} s, ${stats.credits} credit(s), model delay ${stats.delayMs} ms${lat}\n`);
    }
    return 0;
  } catch (err) {
    io.err.write(`nsm stream: ${(err as Error).message}\n`);
    return 1;
  }
}

function parse(argv: string[], env: NodeJS.ProcessEnv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      output: { type: 'string', short: 'o' },
      model: { type: 'string', short: 'm', default: 'nsm-2' },
      rate: { type: 'string', short: 'r', default: '16000' },
      channels: { type: 'string', short: 'c', default: '1' },
      'attenuation-limit': { type: 'string', short: 'a' },
      realtime: { type: 'boolean', default: false },
      server: { type: 'string' },
      token: { type: 'string' },
      quiet: { type: 'boolean', short: 'q', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return { help: true } as ReturnType<typeof checked>;
  return checked(values, positionals, env);
}

function checked(values: Record<string, string | boolean | undefined>, positionals: string[], env: NodeJS.ProcessEnv) {
  if (positionals.length !== 1) throw new UsageError('give one input: a file, or - for standard input');
  if (!values.output) throw new UsageError('-o OUT is required (a .wav file, or - for raw PCM on standard output)');
  const rate = Number(values.rate);
  if (!Number.isInteger(rate) || rate < 8000 || rate > 48000) throw new UsageError(`--rate must be an integer from 8000 to 48000 (got "${values.rate}")`);
  const channels = Number(values.channels);
  if (channels !== 1 && channels !== 2) throw new UsageError(`--channels must be 1 or 2 (got "${values.channels}")`);
  const server = String(values.server ?? env.NSM_URL ?? 'http://localhost:8080');
  if (!/^https?:\/\//.test(server)) throw new UsageError(`--server must be an http(s) URL (got "${server}")`);
  const token = String(values.token ?? env.NSM_TOKEN ?? '');
  if (!token) throw new UsageError('no token: set NSM_TOKEN or pass --token');
  return {
    help: false,
    input: positionals[0],
    output: String(values.output),
    model: String(values.model),
    rate,
    channels,
    attenuation: values['attenuation-limit'] as string | undefined,
    realtime: !!values.realtime,
    server,
    token,
    quiet: !!values.quiet,
  };
}

interface Result {
  seconds: number;
  wallS: number;
  credits: number;
  delayMs: number;
  latency: number[];
}

async function stream(o: ReturnType<typeof checked>, io: Io): Promise<Result> {
  const config = loadConfig(io.env);
  // ffmpeg turns any input into the stream's PCM; its output is read as it comes (stdin input works live).
  const ff = spawn(config.ffmpegPath, ['-v', 'error', '-i', o.input === '-' ? 'pipe:0' : o.input, '-ac', String(o.channels), '-ar', String(o.rate), '-f', 's16le', 'pipe:1'], {
    stdio: [o.input === '-' ? 'inherit' : 'ignore', 'pipe', 'pipe'],
  });
  let ffErr = '';
  const input = pcmQueue(ff.stdout!);
  ff.stderr!.on('data', (d: Buffer) => (ffErr += d));
  const q = new URLSearchParams({ model: o.model, sample_rate: String(o.rate), channels: String(o.channels) });
  if (o.attenuation !== undefined) q.set('attenuation_limit_db', o.attenuation);
  const url = `${o.server.replace(/^http/, 'ws').replace(/\/$/, '')}/v1/noise-suppressor/stream?${q}`;
  const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${o.token}` }, perMessageDeflate: false });
  const toFile = o.output !== '-';
  const sink = toFile ? fs.createWriteStream(o.output + '.partial') : io.out;
  if (toFile) (sink as fs.WriteStream).write(Buffer.alloc(44)); // header written at the end, when sizes are known
  const frameBytes = (o.rate / 50) * 2 * o.channels;
  const started = performance.now();
  const sendTimes: number[] = [];
  const latency: number[] = [];
  let outBytes = 0;
  let delay = 0;
  let credits = 0;
  let sentBytes = 0;
  const ready = new Promise<void>((resolve, reject) => {
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => {
        let why = body;
        try {
          why = (JSON.parse(body) as { error?: { message?: string } }).error?.message ?? body;
        } catch {
          // not JSON
        }
        reject(new Error(`refused (${res.statusCode}): ${why}`));
      });
    });
    ws.once('error', reject);
    ws.once('message', (data) => {
      const msg = JSON.parse(String(data)) as { type: string; latency_samples?: number };
      if (msg.type !== 'ready') return reject(new Error(`unexpected first message ${String(data).slice(0, 200)}`));
      delay = msg.latency_samples ?? 0;
      resolve();
    });
  });
  await ready;
  const finished = new Promise<void>((resolve, reject) => {
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        const buf = data as Buffer;
        if (o.realtime) {
          // The last sample of this message counts from the frame holding input sample end - 1 + delay; when that
          // frame is not sent yet (the declared delay covers the worst hop position), the server added nothing.
          const end = (outBytes + buf.length) / (2 * o.channels);
          const k = Math.floor((end - 1 + delay) / (o.rate / 50));
          latency.push(k < sendTimes.length ? Math.max(0, performance.now() - sendTimes[k]) : 0);
        }
        outBytes += buf.length;
        sink.write(buf);
        return;
      }
      const msg = JSON.parse(String(data)) as { type: string; stats?: { credits_charged?: number }; error?: { type: string; message: string } };
      if (msg.type === 'done') credits = msg.stats?.credits_charged ?? 0;
      if (msg.type === 'error') reject(new Error(`${msg.error?.type}: ${msg.error?.message}`));
    });
    ws.on('close', (code) => (code === 1000 ? resolve() : reject(new Error(`stream closed with code ${code}`))));
  });
  finished.catch(() => ff.kill());
  let pending: Buffer = Buffer.alloc(0);
  for (let chunk = await input.next(); chunk; chunk = await input.next()) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= frameBytes) {
      const frame = pending.subarray(0, frameBytes);
      pending = pending.subarray(frameBytes);
      if (o.realtime) {
        const due = started + (sendTimes.length * 20);
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      } else {
        while (ws.bufferedAmount > 1 << 20) await new Promise((r) => setTimeout(r, 5));
      }
      sendTimes.push(performance.now());
      ws.send(frame);
      sentBytes += frame.length;
    }
  }
  if (pending.length) {
    ws.send(pending.subarray(0, pending.length - (pending.length % (2 * o.channels))));
    sentBytes += pending.length;
  }
  const ffCode = await new Promise<number | null>((r) => (ff.exitCode !== null ? r(ff.exitCode) : ff.once('close', r)));
  if (ffCode !== 0) {
    ws.close();
    throw new Error(`could not read ${o.input}: ${ffErr.trim().split('\n').pop() ?? 'ffmpeg failed'}`);
  }
  ws.send(JSON.stringify({ type: 'end' }));
  await finished;
  if (toFile) {
    const w = sink as fs.WriteStream;
    await new Promise<void>((r) => w.end(r));
    const fd = fs.openSync(o.output + '.partial', 'r+');
    fs.writeSync(fd, pcm16WavHeader(outBytes, o.rate, o.channels), 0, 44, 0);
    fs.closeSync(fd);
    fs.renameSync(o.output + '.partial', o.output);
  }
  return {
    seconds: sentBytes / (2 * o.channels * o.rate),
    wallS: (performance.now() - started) / 1000,
    credits,
    delayMs: Math.round((delay * 1000) / o.rate),
    latency: latency.sort((a, b) => a - b),
  };
}

/**
 * ffmpeg's output read from the moment it starts (the WebSocket handshake may take longer than a short file's
 * decoding), held until the sender takes it; ffmpeg is paused while more than a few seconds wait.
 */
function pcmQueue(out: NodeJS.ReadableStream): { next(): Promise<Buffer | null> } {
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
  return {
    async next(): Promise<Buffer | null> {
      while (chunks.length === 0 && !ended) await new Promise<void>((r) => (wake = r));
      wake = null;
      const c = chunks.shift() ?? null;
      if (c) {
        queued -= c.length;
        if (queued <= 1 << 19) out.resume();
      }
      return c;
    },
  };
}


function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
