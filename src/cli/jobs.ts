// `nsm jobs ...`: asynchronous jobs against a running server (NSM_URL, token in NSM_TOKEN or --token).
//   nsm jobs submit FILE | --url URL [options] [--wait [-o OUT]]     upload (streamed) or URL → job id
//   nsm jobs status ID | list | wait ID | download ID [-o OUT] | cancel ID
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { isOutputFormat, OUTPUT_FORMATS } from '../audio/formats';
import { LOUDNESS_RANGE } from '../dsp/normalize';
import { MODEL_IDS } from '../inference/types';
import { CONFIG_EXIT, configOrExplain } from './environment';


export const JOBS_EXIT = { ok: 0, failure: 1, usage: 2, badInput: 3, interrupted: 130 } as const;

export const JOBS_HELP = `nsm jobs — long recordings as asynchronous jobs on a server

Usage:
  nsm jobs submit FILE [options]        upload FILE (streamed) and print the job id
  nsm jobs submit --url URL [options]   let the server fetch URL (http/https, public address)
  nsm jobs status ID                    the job as JSON
  nsm jobs list [--status S] [--limit N]
  nsm jobs wait ID [--timeout S]        poll until it finishes; progress on stderr
  nsm jobs download ID [-o OUT]         save the result (resumes a partial OUT.part)
  nsm jobs cancel ID                    cancel a queued/running job, or delete a finished job's result

Submit options:
  -m, --model M             ${MODEL_IDS.join(', ')} (server default nsm-2)
  -a, --attenuation-limit L maximum noise reduction in dB, 0-100
  -f, --format F            output format: ${OUTPUT_FORMATS.join(', ')} (default wav)
  -l, --loudness LUFS       normalise the result to this integrated loudness (${LOUDNESS_RANGE.min} to ${LOUDNESS_RANGE.max}, e.g. -16)
      --keep-rate | --model-rate
      --webhook-url URL     POSTed a signed job.succeeded / job.failed event
      --wait                wait for the job, then download the result
  -o, --output OUT          with --wait or download: where to save (default: the server's file name)

Common options:
      --server URL          default NSM_URL, else http://localhost:8080
      --token TOKEN         default NSM_TOKEN
      --json                machine-readable output on stdout
  -q, --quiet               no progress on stderr
      --interval S          seconds between polls (default 2)

Exit codes: 0 ok (wait: the job succeeded), 1 the job failed or was canceled / server error, 2 usage error,
3 the server refused the input (4xx), 130 interrupted.
`;

export class JobsUsageError extends Error {}

interface Opts {
  positional: string[];
  values: Map<string, string>;
  flags: Set<string>;
}

const VALUE = new Map<string, string>([
  ['-m', 'model'], ['--model', 'model'],
  ['-a', 'attenuation-limit'], ['--attenuation-limit', 'attenuation-limit'],
  ['-f', 'format'], ['--format', 'format'],
  ['-l', 'loudness'], ['--loudness', 'loudness'], ['--loudness-lufs', 'loudness'],
  ['-o', 'output'], ['--output', 'output'],
  ['--url', 'url'], ['--webhook-url', 'webhook-url'], ['--server', 'server'], ['--token', 'token'],
  ['--status', 'status'], ['--limit', 'limit'], ['--timeout', 'timeout'], ['--interval', 'interval'],
]);
const FLAGS = new Map<string, string>([
  ['--keep-rate', 'keep-rate'], ['--model-rate', 'model-rate'], ['--wait', 'wait'], ['--json', 'json'],
  ['-q', 'quiet'], ['--quiet', 'quiet'],
]);

export function parseJobsArgs(argv: string[]): Opts {
  const out: Opts = { positional: [], values: new Map(), flags: new Set() };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let inline: string | undefined;
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    if (eq > 0) {
      inline = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const name = VALUE.get(arg);
    if (name) {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '') throw new JobsUsageError(`${arg} needs a value`);
      out.values.set(name, v);
      continue;
    }
    const flag = FLAGS.get(arg);
    if (flag) {
      out.flags.add(flag);
      continue;
    }
    if (arg.startsWith('-') && arg !== '-') throw new JobsUsageError(`unknown option ${arg}`);
    out.positional.push(arg);
  }
  return out;
}

/** A JSON answer from the server, or its error envelope. */
interface ApiAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export class ServerError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

class Client {
  constructor(
    readonly base: string,
    private readonly token: string,
  ) {}

  private url(p: string): URL {
    return new URL(`${this.base}/v1/noise-suppressor/${p}`);
  }

  request(method: string, p: string, opts: { headers?: Record<string, string>; body?: (req: http.ClientRequest) => void } = {}): Promise<http.IncomingMessage> {
    const url = this.url(p);
    const client = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const req = client.request(url, { method, headers: { Authorization: `Bearer ${this.token}`, ...opts.headers } });
      req.on('response', resolve);
      req.on('error', (err: NodeJS.ErrnoException) => reject(new ServerError(0, 'unreachable', `cannot reach ${this.base}: ${err.code ?? err.message}`)));
      if (opts.body) opts.body(req);
      else req.end();
    });
  }

  async json(method: string, p: string, opts: { headers?: Record<string, string>; body?: (req: http.ClientRequest) => void } = {}): Promise<ApiAnswer> {
    for (let attempt = 0; ; attempt++) {
      const res = await this.request(method, p, opts);
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      let json: unknown = null;
      try {
        json = JSON.parse(text);
      } catch {
        // not JSON
      }
      const status = res.statusCode ?? 0;
      // Rate limited or briefly unavailable: wait as told and retry idempotent calls.
      if ((status === 429 || status === 503) && method === 'GET' && attempt < 5) {
        const wait = Math.min(60, Number(res.headers['retry-after']) || 2);
        await new Promise((r) => setTimeout(r, wait * 1000));
        continue;
      }
      if (status >= 400) {
        const err = (json as { error?: { type?: string; message?: string } } | null)?.error;
        throw new ServerError(status, err?.type ?? 'http_error', err?.message ?? `HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ''}`);
      }
      return { status, headers: res.headers, json };
    }
  }
}

/** A multipart body streamed from disk: fields, then the file; Content-Length known in advance. */
function multipartUpload(file: string, fields: Array<[string, string]>, onBytes: (n: number) => void) {
  const boundary = '----nsm' + Math.random().toString(16).slice(2) + Date.now().toString(16);
  const safeName = path.basename(file).replace(/["\r\n\\]/g, '_');
  const head = Buffer.from(
    fields.map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`).join('') +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${safeName}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    'utf8',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`, 'utf8');
  const size = head.length + fs.statSync(file).size + tail.length;
  return {
    headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': String(size) },
    size,
    write(req: http.ClientRequest): void {
      req.write(head);
      const input = fs.createReadStream(file);
      input.on('data', (c) => onBytes(c.length));
      input.on('end', () => req.end(tail));
      input.on('error', (err) => req.destroy(err));
      input.pipe(req, { end: false });
    },
  };
}

function progressLine(stream: NodeJS.WriteStream, quiet: boolean) {
  const tty = !!stream.isTTY;
  let last = '';
  let drew = false;
  return {
    show(text: string): void {
      if (quiet || text === last) return;
      last = text;
      if (tty) {
        stream.write(`\r${text}\x1b[K`);
        drew = true;
      } else stream.write(text + '\n');
    },
    done(): void {
      if (drew) stream.write('\r\x1b[K');
      drew = false;
    },
  };
}

function bar(frac: number): string {
  const width = 30;
  return `[${'#'.repeat(Math.round(frac * width)).padEnd(width, '.')}] ${(frac * 100).toFixed(0).padStart(3)}%`;
}

function mb(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MB`;
}

/** The file name from Content-Disposition (base name only), else null. */
function dispositionName(header: string | undefined): string | null {
  if (!header) return null;
  const star = /filename\*=UTF-8''([^;]+)/i.exec(header);
  let name: string | null = null;
  if (star) {
    try {
      name = decodeURIComponent(star[1]);
    } catch {
      name = null;
    }
  }
  name ??= /filename="([^"]*)"/i.exec(header)?.[1] ?? null;
  if (!name) return null;
  const base = path.basename(name.replace(/\\/g, '/'));
  return base && base !== '.' && base !== '..' ? base : null;
}

export interface JobsIo {
  out: NodeJS.WritableStream;
  err: NodeJS.WriteStream;
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}

export async function runJobsCli(argv: string[], io: JobsIo = { out: process.stdout, err: process.stderr }): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help' || rest.includes('--help')) {
    io.out.write(JOBS_HELP);
    return sub ? JOBS_EXIT.ok : JOBS_EXIT.usage;
  }
  const config = configOrExplain((line) => io.err.write(line + '\n'), io.env ?? process.env);
  if (!config) return CONFIG_EXIT;
  let opts: Opts;
  let client: Client;
  try {
    opts = parseJobsArgs(rest);
    const server = (opts.values.get('server') ?? config.jobs.clientUrl).replace(/\/+$/, '');
    const token = opts.values.get('token') ?? config.jobs.clientToken;
    if (!token) throw new JobsUsageError('no token: set NSM_TOKEN or pass --token');
    try {
      const u = new URL(server);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
    } catch {
      throw new JobsUsageError(`--server must be an http(s) URL, got "${server}"`);
    }
    client = new Client(server, token);
  } catch (err) {
    io.err.write(`nsm jobs: ${(err as Error).message}\nTry "nsm jobs --help".\n`);
    return JOBS_EXIT.usage;
  }
  const json = opts.flags.has('json');
  const quiet = opts.flags.has('quiet');
  const intervalS = Number(opts.values.get('interval') ?? 2);
  const progress = progressLine(io.err, quiet);
  const print = (job: unknown, human: string): void => {
    io.out.write(json ? JSON.stringify(job) + '\n' : human + '\n');
  };
  const needId = (): string => {
    const id = opts.positional[0];
    if (!id || opts.positional.length > 1) throw new JobsUsageError(`${sub} needs exactly one job id`);
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) throw new JobsUsageError(`not a job id: "${id}"`);
    return id;
  };

  const wait = async (id: string): Promise<any> => {
    const timeoutS = Number(opts.values.get('timeout') ?? 0);
    if (!(intervalS > 0) || !(timeoutS >= 0)) throw new JobsUsageError('--interval must be > 0 and --timeout >= 0');
    const end = timeoutS > 0 ? Date.now() + timeoutS * 1000 : Infinity;
    for (;;) {
      if (io.signal?.aborted) throw Object.assign(new Error('interrupted'), { name: 'AbortError' });
      const job = (await client.json('GET', `jobs/${id}`)).json;
      if (job.status === 'queued') progress.show(`${id} queued`);
      else if (job.status === 'running') progress.show(`${id} running ${bar(job.progress)}`);
      else {
        progress.done();
        return job;
      }
      if (Date.now() > end) {
        progress.done();
        throw new ServerError(0, 'timeout', `still ${job.status} after ${timeoutS} s`);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, intervalS * 1000);
        io.signal?.addEventListener('abort', () => {
          clearTimeout(t);
          resolve();
        }, { once: true });
      });
    }
  };

  const download = async (id: string, job: any): Promise<string> => {
    if (job.status !== 'succeeded' || !job.result) {
      throw new ServerError(409, 'job_not_finished', `job ${id} is ${job.status}${job.error ? ` (${job.error.type}: ${job.error.message})` : ''}; no result`);
    }
    const total: number = job.result.bytes;
    let output = opts.values.get('output') ?? null;
    const partial = (name: string): string => `${name}.part`;
    // Resume a partial download when its .part file is there.
    let have = 0;
    if (output && fs.existsSync(partial(output))) have = fs.statSync(partial(output)).size;
    const res = await client.request('GET', `jobs/${id}/result`, { headers: have > 0 && have < total ? { Range: `bytes=${have}-` } : {} });
    const status = res.statusCode ?? 0;
    if (status !== 200 && status !== 206) {
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      let message = `HTTP ${status}`;
      try {
        message = JSON.parse(Buffer.concat(chunks).toString()).error.message;
      } catch {
        // keep the status
      }
      throw new ServerError(status, 'download_failed', message);
    }
    output ??= dispositionName(res.headers['content-disposition'] as string | undefined) ?? `${id}.${job.params.output_format}`;
    const resumed = status === 206 && have > 0;
    if (!resumed) have = 0;
    const out = fs.createWriteStream(partial(output), { flags: resumed ? 'a' : 'w' });
    let got = have;
    res.on('data', (c: Buffer) => {
      got += c.length;
      progress.show(`downloading ${bar(total ? got / total : 0)} ${mb(got)}`);
    });
    await new Promise<void>((resolve, reject) => {
      res.pipe(out);
      out.on('finish', resolve);
      out.on('error', reject);
      res.on('error', reject);
      res.on('aborted', () => reject(new ServerError(0, 'download_failed', 'the download broke off; run the same command again to resume')));
    });
    progress.done();
    const size = fs.statSync(partial(output)).size;
    if (size !== total) throw new ServerError(0, 'download_failed', `got ${size} of ${total} bytes; run the same command again to resume`);
    fs.renameSync(partial(output), output);
    return output;
  };

  try {
    switch (sub) {
      case 'submit': {
        const url = opts.values.get('url');
        const file = opts.positional[0];
        if (!!url === !!file || opts.positional.length > 1) throw new JobsUsageError('submit takes one FILE or --url URL');
        const fields: Array<[string, string]> = [];
        const model = opts.values.get('model');
        if (model !== undefined) {
          if (!(MODEL_IDS as readonly string[]).includes(model)) throw new JobsUsageError(`unknown model "${model}" (${MODEL_IDS.join(', ')})`);
          fields.push(['model', model]);
        }
        const limit = opts.values.get('attenuation-limit');
        if (limit !== undefined) {
          const n = Number(limit);
          if (!Number.isFinite(n) || n < 0 || n > 100) throw new JobsUsageError('--attenuation-limit must be a number from 0 to 100');
          fields.push(['attenuation_limit_db', limit]);
        }
        const format = opts.values.get('format')?.toLowerCase();
        if (format !== undefined) {
          if (!isOutputFormat(format)) throw new JobsUsageError(`--format must be one of ${OUTPUT_FORMATS.join(', ')}`);
          fields.push(['output_format', format]);
        }
        const loudness = opts.values.get('loudness');
        if (loudness !== undefined) {
          const n = Number(loudness);
          if (!Number.isFinite(n) || n < LOUDNESS_RANGE.min || n > LOUDNESS_RANGE.max) {
            throw new JobsUsageError(`--loudness must be a number from ${LOUDNESS_RANGE.min} to ${LOUDNESS_RANGE.max} (LUFS), got "${loudness}"`);
          }
          fields.push(['loudness_lufs', loudness]);
        }
        if (opts.flags.has('keep-rate') && opts.flags.has('model-rate')) throw new JobsUsageError('--keep-rate and --model-rate exclude each other');
        if (opts.flags.has('model-rate')) fields.push(['keep_input_sample_rate', 'false']);
        const hook = opts.values.get('webhook-url');
        if (hook !== undefined) fields.push(['webhook_url', hook]);
        let answer: ApiAnswer;
        if (url) {
          fields.push(['url', url]);
          const body = Buffer.from(fields.map(([k, v]) => `--b\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`).join('') + '--b--\r\n');
          answer = await client.json('POST', 'jobs', {
            headers: { 'Content-Type': 'multipart/form-data; boundary=b', 'Content-Length': String(body.length) },
            body: (req) => req.end(body),
          });
        } else {
          if (!fs.existsSync(file!) || !fs.statSync(file!).isFile()) {
            io.err.write(`nsm jobs: input not found: ${file}\n`);
            return JOBS_EXIT.badInput;
          }
          let sent = 0;
          const upload = multipartUpload(file!, fields, (n) => {
            sent += n;
            progress.show(`uploading ${bar(sent / Math.max(1, upload.size))} ${mb(sent)}`);
          });
          answer = await client.json('POST', 'jobs', { headers: upload.headers, body: (req) => upload.write(req) });
          progress.done();
        }
        const job = answer.json;
        if (!opts.flags.has('wait')) {
          print(job, job.id);
          return JOBS_EXIT.ok;
        }
        if (!quiet) io.err.write(`submitted ${job.id}\n`);
        const finished = await wait(job.id);
        if (finished.status !== 'succeeded') {
          print(finished, `${finished.id} ${finished.status}${finished.error ? `: ${finished.error.type}: ${finished.error.message}` : ''}`);
          return JOBS_EXIT.failure;
        }
        const saved = await download(job.id, finished);
        print({ ...finished, output: saved }, `wrote ${saved} (${job.id})`);
        return JOBS_EXIT.ok;
      }
      case 'status': {
        const job = (await client.json('GET', `jobs/${needId()}`)).json;
        io.out.write(JSON.stringify(job, null, json ? 0 : 2) + '\n');
        return JOBS_EXIT.ok;
      }
      case 'list': {
        const q = new URLSearchParams();
        for (const k of ['status', 'limit']) if (opts.values.has(k)) q.set(k, opts.values.get(k)!);
        const page = (await client.json('GET', `jobs${q.size ? `?${q}` : ''}`)).json;
        if (json) io.out.write(JSON.stringify(page) + '\n');
        else {
          for (const j of page.jobs) {
            io.out.write(`${j.id}  ${j.status.padEnd(9)}  ${(j.progress * 100).toFixed(0).padStart(3)}%  ${j.created_at}  ${j.input.filename}\n`);
          }
          if (page.jobs.length === 0) io.out.write('no jobs\n');
        }
        return JOBS_EXIT.ok;
      }
      case 'wait': {
        const job = await wait(needId());
        print(job, `${job.id} ${job.status}${job.error ? `: ${job.error.type}: ${job.error.message}` : ''}`);
        return job.status === 'succeeded' ? JOBS_EXIT.ok : JOBS_EXIT.failure;
      }
      case 'download': {
        const id = needId();
        const job = (await client.json('GET', `jobs/${id}`)).json;
        const saved = await download(id, job);
        print({ id, output: saved }, `wrote ${saved}`);
        return JOBS_EXIT.ok;
      }
      case 'cancel': {
        const job = (await client.json('DELETE', `jobs/${needId()}`)).json;
        print(job, `${job.id} ${job.status}${job.result_deleted_at ? ' (result deleted)' : ''}`);
        return JOBS_EXIT.ok;
      }
      default:
        throw new JobsUsageError(`unknown jobs command "${sub}"`);
    }
  } catch (err) {
    progress.done();
    if (err instanceof JobsUsageError) {
      io.err.write(`nsm jobs: ${err.message}\nTry "nsm jobs --help".\n`);
      return JOBS_EXIT.usage;
    }
    if ((err as Error).name === 'AbortError') {
      io.err.write('nsm jobs: interrupted\n');
      return JOBS_EXIT.interrupted;
    }
    if (err instanceof ServerError) {
      io.err.write(`nsm jobs: ${err.status ? `${err.status} ${err.type}: ` : ''}${err.message}\n`);
      return err.status >= 400 && err.status < 500 && err.status !== 409 && err.status !== 429 ? JOBS_EXIT.badInput : JOBS_EXIT.failure;
    }
    io.err.write(`nsm jobs: ${(err as Error).message}\n`);
    return JOBS_EXIT.failure;
  }
}
