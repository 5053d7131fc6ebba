// `nsm denoise`: files (or stdin) through the local engine, no server (the subcommand table is in nsm.ts).
//
//   nsm denoise IN... [-o OUT | -d DIR] [--model M] [--attenuation-limit L] [--format F] [--loudness LUFS]
//                     [--keep-rate|--model-rate] [--speech-segments] [--trim-silence [--max-pause S]]
//                     [--echo-reference FAR] [--force] [--json] [--quiet]
//
// It shares the service's pipeline (ffmpeg decode, ONNX engine, ffmpeg encode). Outputs are written to a temporary
// name beside the target and renamed when complete, so an interrupted or failed run never leaves half a file and
// never replaces an existing one unless --force says so.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Config } from '../config';
import { OUTPUT_FORMATS, type OutputFormat } from '../audio/formats';
import { AudioAbortedError, AudioInputError, denoiseFile, type DenoiseFileOptions, type DenoiseStats } from '../pipeline';
import { VIDEO_EXTENSIONS, VideoRequestError, type VideoContainer } from '../video';
import { LOUDNESS_PRESETS, LOUDNESS_RANGE } from '../dsp/normalize';
import { DEFAULT_MODEL, MODEL_IDS, type ModelId } from '../inference/types';
import { createInferenceEngine } from '../inference/runtime/engine';
import type { InferenceEngine } from '../inference/types';
import { existingRefusal, flag, parseCommandLine, sameFile, stringOf, usageLine, UsageError, type OptionSpec } from './args';
import { CONFIG_EXIT, configOrExplain } from './environment';
import { progressReporter } from './progress';
import { shown, summaryLine } from './denoise-summary';
import { partialName, spoolStdin, videoOut } from './denoise-files';
import { formatOfPath, OUTPUT_EXTENSIONS, videoOfPath } from './output-names';
import { TRIM_DEFAULT_MAX_PAUSE_S, TRIM_MAX_PAUSE_BOUNDS, VAD_DEFAULTS, type SpeechRequest, type SpeechSegment } from '../vad/options';

export const EXIT = { ok: 0, failure: 1, usage: 2, badInput: 3, interrupted: 130 } as const;

export { OUTPUT_EXTENSIONS, OUTPUT_FORMATS };

export const DENOISE_HELP = `nsm denoise — remove background noise from speech recordings

Usage:
  nsm denoise IN... [-o OUT | -d DIR] [--model M] [--attenuation-limit L] [--format F] [--loudness LUFS]
                    [--keep-rate | --model-rate] [--speech-segments] [--trim-silence [--max-pause S]]
                    [--echo-reference FAR] [--force] [--json] [--quiet]

  IN may be several files (nsm denoise *.mp3) or - for standard input.

Options:
  -o, --output OUT          output file, or - for standard output (one input only). Its extension picks the
                            format: ${Object.keys(OUTPUT_EXTENSIONS).map((e) => '.' + e).join(', ')}; for a video input
                            .mp4, .mov, .mkv or .webm: the same video (copied, not re-encoded) with its audio
                            cleaned (AAC in MP4/MOV, Opus in MKV/WebM), subtitles and chapters kept
  -d, --out-dir DIR         write each output into DIR, created if missing (default: next to its input)
                            Default name: <input name>_denoised.<format>; for stdin input, standard output.
  -f, --format F            ${OUTPUT_FORMATS.join(', ')} (default: from OUT's extension, else wav);
                            mp3 64, opus 32, m4a (AAC) 64 kb/s per channel
  -l, --loudness L          normalise the cleaned audio to this integrated loudness (EBU R128, ${LOUDNESS_RANGE.min} to ${LOUDNESS_RANGE.max}
                            LUFS), true peak at most -1 dBTP (-2 for lossy formats); or podcast (-16), broadcast (-23),
                            keep (the input's speech loudness: cleaned speech otherwise comes out a few LU quieter)
  -m, --model M             ${MODEL_IDS.join(', ')} (default ${DEFAULT_MODEL})
  -a, --attenuation-limit L maximum noise reduction in dB, 0-100; 0 = remove as much as possible
                            (default: DEFAULT_ATTENUATION_LIMIT_DB, else 0)
      --keep-rate           write at the input file's sample rate (default)
      --model-rate          write at the model's native rate (16000 Hz, 48000 Hz for nsm-2-hd)
      --speech-segments     find where speech is in the cleaned audio (Silero VAD): the segments (seconds of
                            the input) in the --json line, else listed on stderr
      --trim-silence        shorten every pause longer than --max-pause to it (crossfaded cuts)
      --max-pause S         the longest pause kept with --trim-silence, ${TRIM_MAX_PAUSE_BOUNDS.min}-${TRIM_MAX_PAUSE_BOUNDS.max} s (default ${TRIM_DEFAULT_MAX_PAUSE_S})
      --echo-reference FAR  remove the echo of FAR from IN before denoising: FAR is what the loudspeaker played
                            (the far end's track of the call, the agent's speech), any format and rate, its
                            timeline starting with IN's (one input only; docs/echo.md)
      --force               replace output files that already exist (default: refuse, change nothing)
      --json                one JSON line of stats per file on stdout (not with -o -)
  -q, --quiet               no progress or summary lines on stderr

Inputs: anything ffmpeg decodes (WAV, FLAC, OGG/Vorbis, Opus, MP3, M4A/AAC, WebM), any rate, any channel count.
Several files are processed concurrently (WORKERS at a time); a file that fails does not stop the others.
Exit codes: 0 all ok, 1 internal failure, 2 usage error (nothing written), 3 an input was unreadable or
unsupported, 130 interrupted.
Environment: MODELS_DIR, FFMPEG_PATH, WORKERS, DEFAULT_ATTENUATION_LIMIT_DB.
`;

/** Kept for callers of the old single-command help. */
export { UsageError, summaryLine };

export interface DenoiseJob {
  /** A path, or '-' for standard input. */
  input: string;
  /** A path, or '-' for standard output. */
  output: string;
}

export interface DenoiseArgs {
  jobs: DenoiseJob[];
  /** -d DIR as given (created when missing), or null. */
  outDir: string | null;
  model: ModelId;
  attenuationLimitDb: number;
  format: OutputFormat;
  /** -o OUT.mp4/.mov/.mkv/.webm: the input's video back with its audio cleaned (src/video). */
  video: VideoContainer | null;
  loudnessLufs: number | 'keep' | null;
  keepInputSampleRate: boolean;
  /** --speech-segments / --trim-silence (the VAD's defaults: docs/speech.md); null: neither. */
  speech: SpeechRequest | null;
  /** --echo-reference FAR (docs/echo.md), or null. */
  echoReference: string | null;
  force: boolean;
  json: boolean;
  quiet: boolean;
}

/** The options of `nsm denoise` (node:util parseArgs, through args.ts). */
const DENOISE_OPTIONS: Record<string, OptionSpec> = {
  output: { type: 'string', short: 'o' },
  'out-dir': { type: 'string', short: 'd' },
  model: { type: 'string', short: 'm' },
  'attenuation-limit': { type: 'string', short: 'a', aliases: ['attenuation-limit-db'] },
  format: { type: 'string', short: 'f' },
  loudness: { type: 'string', short: 'l', aliases: ['loudness-lufs'] },
  'keep-rate': { type: 'boolean' },
  'model-rate': { type: 'boolean' },
  'speech-segments': { type: 'boolean' },
  'trim-silence': { type: 'boolean' },
  'max-pause': { type: 'string' },
  'echo-reference': { type: 'string' },
  force: { type: 'boolean' },
  json: { type: 'boolean' },
  quiet: { type: 'boolean', short: 'q' },
  help: { type: 'boolean', short: 'h' },
};

/** Parses `denoise ...` arguments (after the subcommand). Checks everything that can be checked before any work. */
export function parseDenoiseArgs(argv: string[], defaultAttenuationLimitDb: number): DenoiseArgs {
  const line = parseCommandLine(argv, DENOISE_OPTIONS);
  const inputs = line.positionals;
  const output = stringOf(line, 'output');
  const outDir = stringOf(line, 'out-dir');
  let model: ModelId = DEFAULT_MODEL;
  const m = stringOf(line, 'model');
  if (m !== undefined) {
    if (!(MODEL_IDS as readonly string[]).includes(m)) throw new UsageError(`unknown model "${m}" (expected one of ${MODEL_IDS.join(', ')})`);
    model = m as ModelId;
  }
  let limit = defaultAttenuationLimitDb;
  const rawLimit = stringOf(line, 'attenuation-limit');
  if (rawLimit !== undefined) {
    limit = Number(rawLimit);
    if (!Number.isFinite(limit) || limit < 0 || limit > 100) throw new UsageError(`--attenuation-limit must be a number from 0 to 100, got "${rawLimit}"`);
  }
  let format: OutputFormat | undefined;
  const f = stringOf(line, 'format')?.toLowerCase();
  if (f !== undefined) {
    if (!(OUTPUT_FORMATS as string[]).includes(f)) throw new UsageError(`--format must be one of ${OUTPUT_FORMATS.join(', ')}, got "${f}"`);
    format = f as OutputFormat;
  }
  const loudness = loudnessOption(stringOf(line, 'loudness'));
  if (flag(line, 'keep-rate') && flag(line, 'model-rate')) throw new UsageError('--keep-rate and --model-rate exclude each other');
  const keep = !flag(line, 'model-rate');
  const speech = speechArgs(line);
  const force = flag(line, 'force');
  const json = flag(line, 'json');
  const quiet = flag(line, 'quiet');
  if (inputs.length === 0) throw new UsageError('missing input file (or - for standard input)');
  if (inputs.filter((i) => i === '-').length > 1) throw new UsageError('standard input (-) can be read only once');
  if (output !== undefined && outDir !== undefined) throw new UsageError('use either -o OUT or -d DIR, not both');
  if (output !== undefined && inputs.length > 1) {
    throw new UsageError(`-o names one output but ${inputs.length} inputs were given; use -d DIR for several`);
  }

  // The format: --format, else the output's extension, else wav; an extension that disagrees is a mistake.
  const video = output === undefined ? null : videoOfPath(output);
  if (video && format) throw new UsageError(`--format does not apply to a video output (${output}): its audio is ${video === 'mp4' || video === 'mov' ? 'AAC' : 'Opus'}`);
  if (output !== undefined && output !== '-' && !video) {
    const fromExt = formatOfPath(output);
    if (!fromExt) {
      const ext = path.extname(output) || '(none)';
      throw new UsageError(
        `cannot tell the output format from the extension ${ext} of ${output}; use ${[...Object.keys(OUTPUT_EXTENSIONS), ...VIDEO_EXTENSIONS].map((e) => '.' + e).join(', ')} or --format`,
      );
    }
    if (format && format !== fromExt) throw new UsageError(`--format ${format} does not match the output name ${output}`);
    format = fromExt;
  }
  const fmt: OutputFormat = format ?? 'wav';

  const jobs: DenoiseJob[] = inputs.map((input) => {
    if (output !== undefined) return { input, output };
    if (input === '-') return { input, output: '-' };
    const parsed = path.parse(input);
    return { input, output: path.join(outDir ?? parsed.dir, `${parsed.name}_denoised.${fmt}`) };
  });
  const echoReference = stringOf(line, 'echo-reference') ?? null;
  const seen = new Map<string, string>();
  for (const job of jobs) {
    if (job.output === '-') continue;
    const key = path.resolve(job.output);
    if (job.input !== '-' && sameFile(job.output, job.input)) throw new UsageError(`output would overwrite the input ${job.input}`);
    if (echoReference !== null && echoReference !== '-' && sameFile(job.output, echoReference)) {
      throw new UsageError(`output would overwrite the echo reference ${echoReference}`);
    }
    const other = seen.get(key);
    if (other !== undefined) throw new UsageError(`${other} and ${job.input} would both be written to ${job.output}`);
    seen.set(key, job.input);
  }
  if (json && jobs.some((j) => j.output === '-')) throw new UsageError('--json cannot share standard output with the audio (-o -)');
  if (echoReference !== null && inputs.length > 1) throw new UsageError('--echo-reference goes with one input: each recording has its own far end');
  if (echoReference === '-') throw new UsageError('--echo-reference must be a file (standard input is for the input)');
  if (video && speech?.trimMaxPauseS != null) throw new UsageError('--trim-silence does not apply to a video output: the video keeps its length');
  return { jobs, outDir: outDir ?? null, model, attenuationLimitDb: limit, format: fmt, video, loudnessLufs: loudness, keepInputSampleRate: keep, speech, echoReference, force, json, quiet };
}

function speechArgs(line: ReturnType<typeof parseCommandLine>): SpeechRequest | null {
  const rawPause = stringOf(line, 'max-pause');
  const trim = flag(line, 'trim-silence');
  if (rawPause !== undefined && !trim) throw new UsageError('--max-pause applies only with --trim-silence');
  const pause = rawPause === undefined ? TRIM_DEFAULT_MAX_PAUSE_S : Number(rawPause);
  if (!(pause >= TRIM_MAX_PAUSE_BOUNDS.min && pause <= TRIM_MAX_PAUSE_BOUNDS.max)) {
    throw new UsageError(`--max-pause must be a number from ${TRIM_MAX_PAUSE_BOUNDS.min} to ${TRIM_MAX_PAUSE_BOUNDS.max} (seconds), got "${rawPause}"`);
  }
  const segments = flag(line, 'speech-segments');
  return segments || trim ? { segments, trimMaxPauseS: trim ? pause : null, vad: { ...VAD_DEFAULTS } } : null;
}

type Outcome = { ok: true; stats: DenoiseStats } | { ok: false; code: number; message: string };

export async function runDenoise(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(DENOISE_HELP);
    return EXIT.ok;
  }
  const loaded = configOrExplain((line) => process.stderr.write(line + '\n'));
  if (!loaded) return CONFIG_EXIT;
  // The server lowers its file work (FILE_WORK_NICE, FILE_WORK_IDLE) so that live streams come first; a CLI run has
  // no live streams to yield to, and under SCHED_IDLE it would crawl on a busy desktop.
  const config: Config = { ...loaded, fileWorkNice: 0, fileWorkIdle: false };
  let args: DenoiseArgs;
  try {
    args = parseDenoiseArgs(argv, config.defaultAttenuationLimitDb);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(usageLine('nsm', err.message, 'nsm denoise --help') + '\n');
    return EXIT.usage;
  }
  if (args.jobs.some((j) => j.output === '-') && process.stdout.isTTY) {
    process.stderr.write('nsm: refusing to write audio to a terminal; redirect standard output or use -o FILE\n');
    return EXIT.usage;
  }

  // Everything that can be known before any work: missing inputs and outputs that exist stop the run here.
  // -d DIR is created when missing (`nsm denoise *.mp3 -d cleaned/`), but only once nothing else stands in the way.
  const problems: string[] = [];
  const outDirMissing = args.outDir !== null && !fs.existsSync(args.outDir);
  const outDirNotDir = args.outDir !== null && !outDirMissing && !fs.statSync(args.outDir).isDirectory();
  if (outDirNotDir) problems.push(`${args.outDir} is not a directory`);
  if (args.echoReference !== null && !fs.existsSync(args.echoReference)) problems.push(`input not found: ${args.echoReference} (--echo-reference)`);
  for (const job of args.jobs) {
    if (job.input !== '-' && !fs.existsSync(job.input)) problems.push(`input not found: ${job.input}`);
    if (job.output !== '-' && !outDirMissing && !outDirNotDir) {
      const existing = existingRefusal(job.output, args.force);
      if (existing) problems.push(existing);
      else if (!fs.existsSync(path.dirname(path.resolve(job.output)))) problems.push(`no such directory for ${job.output}`);
    }
  }
  if (problems.length === 0 && outDirMissing) {
    try {
      fs.mkdirSync(args.outDir!, { recursive: true });
    } catch (err) {
      problems.push(`cannot create ${args.outDir}: ${(err as Error).message}`);
    }
  }
  if (problems.length > 0) {
    for (const p of problems) process.stderr.write(`nsm: ${p}\n`);
    process.stderr.write('nsm: nothing was written\n');
    return problems.some((p) => p.startsWith('input not found')) ? EXIT.badInput : EXIT.usage;
  }

  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-'));
  const single = args.jobs.length === 1;
  const concurrency = Math.max(1, Math.min(args.jobs.length, config.workers));
  let engine: InferenceEngine | null = null;
  const outcomes: Outcome[] = new Array(args.jobs.length);
  try {
    // One file is one stream: a single worker starts fastest. Several files run `concurrency` at a time.
    engine = await createInferenceEngine({ ...config, workers: concurrency }, { warmUp: false });
    const run = async (job: DenoiseJob, index: number): Promise<Outcome> => {
      const progress = single && !args.quiet ? progressReporter(process.stderr) : null;
      const input = job.input === '-' ? await spoolStdin(scratch) : job.input;
      const target = job.output === '-' ? path.join(scratch, `stdout-${index}.${args.format}`) : path.resolve(job.output);
      const partial = job.output === '-' ? target : partialName(target);
      let segments: SpeechSegment[] | undefined;
      try {
        const options: DenoiseFileOptions = {
          model: args.model,
          attenuationLimitDb: args.attenuationLimitDb,
          outputFormat: args.format,
          loudnessLufs: args.loudnessLufs,
          keepInputSampleRate: args.keepInputSampleRate,
          speech: args.speech,
          onSpeechSegments: (s) => (segments = s),
          echoReference: args.echoReference,
          signal: controller.signal,
          onProgress: progress ? (d: number, t: number | null) => progress.update(d, t) : undefined,
        };
        const stats = args.video
          ? ((await videoOut({ config, engine: engine! }, input, partial, job.output, args.video, options)) as unknown as DenoiseStats)
          : await denoiseFile({ config, engine: engine! }, input, partial, options);
        progress?.finish();
        if (job.output === '-') {
          await pipeline(fs.createReadStream(target), process.stdout, { end: false });
        } else {
          if (!args.force && fs.existsSync(target)) throw new Error(`${job.output} appeared while processing; not replaced`);
          fs.renameSync(partial, target);
        }
        if (!args.quiet) process.stderr.write(summaryLine(job, stats) + '\n');
        if (!args.quiet && !args.json && args.speech?.segments && segments) {
          for (const s of segments) process.stderr.write(`  speech ${s.start_s.toFixed(3)}–${s.end_s.toFixed(3)} s\n`);
        }
        if (stats.loudness_target_reached === false) {
          const got = stats.output_loudness_lufs; // null: silence; else the limiter's budget ran out (pipeline/loudness.ts)
          const why = got === null ? 'the output is silent (nothing above -70 LUFS to measure)' : `delivered ${got.toFixed(1)} LUFS, as loud as the limiter allows without crushing the speech`;
          process.stderr.write(`nsm: warning: ${shown(job.input, 'stdin')}: loudness target ${stats.loudness_target_lufs} LUFS not reached: ${why}\n`);
        }
        const listed = args.speech?.segments && segments ? { speech_segments: segments } : {};
        if (args.json) process.stdout.write(`${JSON.stringify({ input: job.input, output: job.output, ...stats, ...listed })}\n`);
        return { ok: true, stats };
      } catch (err) {
        progress?.finish();
        fs.rmSync(partial, { force: true });
        if (err instanceof AudioAbortedError) return { ok: false, code: EXIT.interrupted, message: 'interrupted' };
        if (err instanceof AudioInputError || err instanceof VideoRequestError) return { ok: false, code: EXIT.badInput, message: `${shown(job.input, 'stdin')}: ${err.message}` };
        return { ok: false, code: EXIT.failure, message: `${shown(job.input, 'stdin')}: failed: ${(err as Error).message}` };
      }
    };
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < args.jobs.length && !controller.signal.aborted) {
          const i = next++;
          outcomes[i] = await run(args.jobs[i], i);
          const o = outcomes[i];
          if (!o.ok && o.code !== EXIT.interrupted) process.stderr.write(`nsm: ${o.message}\n`);
        }
      }),
    );
  } catch (err) {
    process.stderr.write(`nsm: failed: ${(err as Error).message}\n`);
    return EXIT.failure;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await engine?.close().catch(() => undefined);
    fs.rmSync(scratch, { recursive: true, force: true });
  }

  if (controller.signal.aborted) {
    process.stderr.write('nsm: interrupted\n');
    return EXIT.interrupted;
  }
  const failed = outcomes.filter((o): o is Extract<Outcome, { ok: false }> => !!o && !o.ok);
  if (!single && !args.quiet) {
    process.stderr.write(`nsm: ${args.jobs.length - failed.length} of ${args.jobs.length} files denoised\n`);
  }
  if (failed.length === 0) return EXIT.ok;
  return failed.some((o) => o.code === EXIT.failure) ? EXIT.failure : EXIT.badInput;
}

/** --loudness: LUFS, or a preset of the API's `loudness` field (podcast -16, broadcast -23, keep). */
export function loudnessOption(raw: string | undefined): number | 'keep' | null {
  if (raw === undefined) return null;
  const preset = LOUDNESS_PRESETS[raw.toLowerCase() as keyof typeof LOUDNESS_PRESETS];
  if (Object.hasOwn(LOUDNESS_PRESETS, raw.toLowerCase())) return preset;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < LOUDNESS_RANGE.min || n > LOUDNESS_RANGE.max) {
    throw new UsageError(`--loudness must be a number from ${LOUDNESS_RANGE.min} to ${LOUDNESS_RANGE.max} (LUFS), podcast, broadcast or keep, got "${raw}"`);
  }
  return n;
}
