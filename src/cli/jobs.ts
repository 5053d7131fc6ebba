// `nsm jobs ...`: asynchronous jobs against a running server (NSM_URL, token in NSM_TOKEN or --token).
//   nsm jobs submit FILE | --url URL [options] [--wait [-o OUT]]     upload (streamed) or URL → job id
//   nsm jobs status ID | list | wait ID | download ID [-o OUT] | cancel ID
import fs from 'node:fs';
import { isOutputFormat, OUTPUT_FORMATS } from '../audio/formats';
import { LOUDNESS_RANGE } from '../dsp/normalize';
import { loudnessOption } from './denoise';
import { namedOutput, videoFamily, videoOfPath } from './output-names';
import { planVideo, type VideoContainer } from '../video';
import type { Config } from '../config';
import { MODEL_IDS } from '../inference/types';
import { existingRefusal, flag, parseCommandLine, sameFile, stringOf, usageLine, UsageError, type OptionSpec, type ParsedLine } from './args';
import { CONFIG_EXIT, configOrExplain } from './environment';
import { Client, dispositionName, multipartUpload, ServerError, type ApiAnswer } from './jobs-client';
import { PollSchedule } from './poll-schedule';
import { bar, statusLine } from './progress';

export { ServerError };

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
  -f, --format F            output format: ${OUTPUT_FORMATS.join(', ')} (default wav); video: a video input
                            back in its container (MP4/MOV/MKV/WebM) with its sound cleaned
  -l, --loudness L          normalise the result to this integrated loudness (${LOUDNESS_RANGE.min} to ${LOUDNESS_RANGE.max}, e.g. -16),
                            or podcast, broadcast, keep (the input's speech loudness)
      --echo-reference FAR  upload FAR, what the loudspeaker played (its timeline starts with the input's), and
                            remove its echo before denoising (docs/echo.md)
      --echo-reference-url URL  the same, fetched by the server
      --keep-rate | --model-rate
      --webhook-url URL     POSTed a signed job.succeeded / job.failed event
      --wait                wait for the job, then download the result
  -o, --output OUT          with --wait or download: where to save (default: the server's file name); its
                            extension (.wav, .flac, .mp3, .opus, .m4a; .mp4, .mov, .mkv, .webm: video) picks
                            the format when -f is not given, and must agree with it and with the result
      --force               replace OUT when it exists (without it nothing is written over; never the input)

Common options:
      --server URL          default NSM_URL, else http://localhost:8080
      --token TOKEN         default NSM_TOKEN
      --json                machine-readable output on stdout
  -q, --quiet               no progress on stderr
      --interval S          the longest wait between polls (default 2): polls start 0.1 s apart and grow
                            by half each time up to S, sooner when the progress says the job ends

Exit codes: 0 ok (wait: the job succeeded), 1 the job failed or was canceled / server error, 2 usage error,
3 the server refused the input (4xx), 130 interrupted.
`;

/** The commands of `nsm jobs`. */
const COMMANDS = ['submit', 'status', 'list', 'wait', 'download', 'cancel'];

/** The options of every `nsm jobs` command (node:util parseArgs, through args.ts). */
const JOBS_OPTIONS: Record<string, OptionSpec> = {
  model: { type: 'string', short: 'm' },
  'attenuation-limit': { type: 'string', short: 'a' },
  format: { type: 'string', short: 'f' },
  loudness: { type: 'string', short: 'l', aliases: ['loudness-lufs'] },
  output: { type: 'string', short: 'o' },
  url: { type: 'string' },
  'echo-reference': { type: 'string' },
  'echo-reference-url': { type: 'string' },
  'webhook-url': { type: 'string' },
  server: { type: 'string' },
  token: { type: 'string' },
  status: { type: 'string' },
  limit: { type: 'string' },
  timeout: { type: 'string' },
  interval: { type: 'string' },
  'keep-rate': { type: 'boolean' },
  'model-rate': { type: 'boolean' },
  wait: { type: 'boolean' },
  force: { type: 'boolean' },
  json: { type: 'boolean' },
  quiet: { type: 'boolean', short: 'q' },
  help: { type: 'boolean', short: 'h' },
};

/**
 * Why a job's result must not be saved under `output`: its extension names another format than the job's (a FLAC
 * result in x.mp3, a video in x.wav) or, for a video, another container than the result's. Null when it fits or says
 * nothing.
 */
function resultNameRefusal(output: string, job: { params: { output_format: string }; stats?: { output_container?: VideoContainer } | null }): string | null {
  const named = namedOutput(output);
  if (named === null) return null;
  const have = job.params.output_format;
  if (named !== have) return `the result is ${have === 'video' ? 'a video' : have.toUpperCase()}, not what ${output} names`;
  const own = job.stats?.output_container;
  const video = videoOfPath(output);
  if (video && own && own !== video) return `the result is a ${videoFamily(own)} video: name the output .${own}`;
  return null;
}

/** The video container of a local input, as the server will find it; null when it is not a video ffprobe reads. */
async function localVideoContainer(config: Config, file: string): Promise<VideoContainer | null> {
  try {
    return (await planVideo({ config }, file, file)).container;
  } catch {
    return null; // the server says what is wrong with it
  }
}

export function parseJobsArgs(argv: string[]): ParsedLine {
  return parseCommandLine(argv, JOBS_OPTIONS);
}

function mb(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MB`;
}

export interface JobsIo {
  out: NodeJS.WritableStream;
  err: NodeJS.WriteStream;
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}

export async function runJobsCli(argv: string[], io: JobsIo = { out: process.stdout, err: process.stderr }): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help' || rest.includes('--help') || rest.includes('-h')) {
    io.out.write(JOBS_HELP);
    return sub ? JOBS_EXIT.ok : JOBS_EXIT.usage;
  }
  const usage = (message: string): number => {
    io.err.write(usageLine('nsm jobs', message, 'nsm jobs --help') + '\n');
    return JOBS_EXIT.usage;
  };
  if (!COMMANDS.includes(sub)) return usage(sub.startsWith('-') ? `unknown option ${sub}` : `unknown jobs command "${sub}"`);
  const config = configOrExplain((line) => io.err.write(line + '\n'), io.env ?? process.env);
  if (!config) return CONFIG_EXIT;
  let opts: ParsedLine;
  let client: Client;
  try {
    opts = parseJobsArgs(rest);
    const server = (stringOf(opts, 'server') ?? config.jobs.clientUrl).replace(/\/+$/, '');
    const token = stringOf(opts, 'token') ?? config.jobs.clientToken;
    if (!token) throw new UsageError('no token: set NSM_TOKEN or pass --token');
    try {
      const u = new URL(server);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
    } catch {
      throw new UsageError(`--server must be an http(s) URL, got "${server}"`);
    }
    client = new Client(server, token);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    return usage(err.message);
  }
  const json = flag(opts, 'json');
  const quiet = flag(opts, 'quiet');
  const intervalS = Number(stringOf(opts, 'interval') ?? 2);
  // Frames on a terminal only; elsewhere a line per change of state and per finished file.
  const progress = statusLine(io.err, quiet);
  const print = (job: unknown, human: string): void => {
    io.out.write(json ? JSON.stringify(job) + '\n' : human + '\n');
  };
  const needId = (): string => {
    const id = opts.positionals[0];
    if (!id || opts.positionals.length > 1) throw new UsageError(`${sub} needs exactly one job id`);
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) throw new UsageError(`not a job id: "${id}"`);
    return id;
  };

  const wait = async (id: string): Promise<any> => {
    const timeoutS = Number(stringOf(opts, 'timeout') ?? 0);
    if (!(intervalS > 0) || !(timeoutS >= 0)) throw new UsageError('--interval must be > 0 and --timeout >= 0');
    const end = timeoutS > 0 ? Date.now() + timeoutS * 1000 : Infinity;
    let lastStatus = '';
    const schedule = new PollSchedule(intervalS);
    for (;;) {
      if (io.signal?.aborted) throw Object.assign(new Error('interrupted'), { name: 'AbortError' });
      const job = (await client.json('GET', `jobs/${id}`)).json;
      if (job.status !== lastStatus) progress.note(`${id} ${job.status}`);
      lastStatus = job.status;
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
        const t = setTimeout(resolve, schedule.next(job, Date.now()) * 1000);
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
    let output = stringOf(opts, 'output') ?? null;
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
    const existing = resultNameRefusal(output, job) ?? existingRefusal(output, flag(opts, 'force'));
    if (existing) {
      res.destroy(); // not read through: a result may be gigabytes
      throw new UsageError(`${existing} (the result stays on the server: nsm jobs download ${id} -o OTHER)`);
    }
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
        const url = stringOf(opts, 'url');
        const file = opts.positionals[0];
        if (!!url === !!file || opts.positionals.length > 1) throw new UsageError('submit takes one FILE or --url URL');
        const fields: Array<[string, string]> = [];
        const model = stringOf(opts, 'model');
        if (model !== undefined) {
          if (!(MODEL_IDS as readonly string[]).includes(model)) throw new UsageError(`unknown model "${model}" (${MODEL_IDS.join(', ')})`);
          fields.push(['model', model]);
        }
        const limit = stringOf(opts, 'attenuation-limit');
        if (limit !== undefined) {
          const n = Number(limit);
          if (!Number.isFinite(n) || n < 0 || n > 100) throw new UsageError('--attenuation-limit must be a number from 0 to 100');
          fields.push(['attenuation_limit_db', limit]);
        }
        const format = stringOf(opts, 'format')?.toLowerCase();
        if (format !== undefined) {
          if (!isOutputFormat(format) && format !== 'video') throw new UsageError(`--format must be one of ${OUTPUT_FORMATS.join(', ')}, video`);
          fields.push(['output_format', format]);
        }
        const loudness = loudnessOption(stringOf(opts, 'loudness'));
        if (loudness === 'keep') fields.push(['loudness', 'keep']);
        else if (loudness !== null) fields.push(['loudness_lufs', String(loudness)]);
        if (flag(opts, 'keep-rate') && flag(opts, 'model-rate')) throw new UsageError('--keep-rate and --model-rate exclude each other');
        if (flag(opts, 'model-rate')) fields.push(['keep_input_sample_rate', 'false']);
        const hook = stringOf(opts, 'webhook-url');
        if (hook !== undefined) fields.push(['webhook_url', hook]);
        const reference = stringOf(opts, 'echo-reference');
        const referenceUrl = stringOf(opts, 'echo-reference-url');
        if (reference !== undefined && referenceUrl !== undefined) throw new UsageError('use either --echo-reference FILE or --echo-reference-url URL, not both');
        if (referenceUrl !== undefined) fields.push(['echo_reference_url', referenceUrl]);
        if (reference !== undefined && !(fs.existsSync(reference) && fs.statSync(reference).isFile())) {
          io.err.write(`nsm jobs: input not found: ${reference} (--echo-reference)\n`);
          return JOBS_EXIT.badInput;
        }
        const parts = reference !== undefined ? [{ field: 'echo_reference', path: reference }] : [];
        // Where --wait will save, checked before the upload spends a credit (a name the server gives is checked then).
        const output = flag(opts, 'wait') ? stringOf(opts, 'output') : undefined;
        if (output !== undefined) {
          // The name's extension says the format, as for `nsm denoise`: taken when --format is not given, else it must agree.
          const named = namedOutput(output);
          if (named !== null && format === undefined) fields.push(['output_format', named]);
          else if (named !== null && named !== format) throw new UsageError(`--format ${format} does not match the output name ${output}`);
          const wanted = videoOfPath(output);
          if (wanted && file !== undefined) {
            // A video comes back in its own container (the server copies its streams): known here from the file
            // itself, before any upload.
            const own = await localVideoContainer(config, file);
            if (own && own !== wanted) {
              io.err.write(`nsm jobs: ${file}: a ${videoFamily(own)} video comes back as .${own} (copied, not converted): name the output .${own}\n`);
              return JOBS_EXIT.badInput;
            }
          }
          for (const [input, what] of [[file, 'input'], [reference, 'echo reference']] as const) {
            if (input !== undefined && sameFile(output, input)) throw new UsageError(`output would overwrite the ${what} ${input}`);
          }
          const existing = existingRefusal(output, flag(opts, 'force'));
          if (existing) throw new UsageError(existing);
        }
        let answer: ApiAnswer;
        if (url && parts.length === 0) {
          fields.push(['url', url]);
          const body = Buffer.from(fields.map(([k, v]) => `--b\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`).join('') + '--b--\r\n');
          answer = await client.json('POST', 'jobs', {
            headers: { 'Content-Type': 'multipart/form-data; boundary=b', 'Content-Length': String(body.length) },
            body: (req) => req.end(body),
          });
        } else {
          if (url) fields.push(['url', url]);
          else if (!fs.existsSync(file!) || !fs.statSync(file!).isFile()) {
            io.err.write(`nsm jobs: input not found: ${file}\n`);
            return JOBS_EXIT.badInput;
          }
          let sent = 0;
          const upload = multipartUpload([...(url ? [] : [{ field: 'file', path: file! }]), ...parts], fields, (n) => {
            sent += n;
            progress.show(`uploading ${bar(sent / Math.max(1, upload.size))} ${mb(sent)}`);
          });
          answer = await client.json('POST', 'jobs', { headers: upload.headers, body: (req) => upload.write(req) });
          progress.line(`uploaded ${url ? reference : file} (${mb(sent)})`);
        }
        const job = answer.json;
        if (!flag(opts, 'wait')) {
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
        for (const k of ['status', 'limit']) {
          const value = stringOf(opts, k);
          if (value !== undefined) q.set(k, value);
        }
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
        return usage(`unknown jobs command "${sub}"`);
    }
  } catch (err) {
    progress.done();
    if (err instanceof UsageError) return usage(err.message);
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
