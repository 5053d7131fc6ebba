// `nsm`: denoise files from the command line with the same pipeline the API uses.
//   nsm denoise IN [-o OUT] [--model M] [--attenuation-limit L] [--format wav|flac] [--keep-rate|--model-rate]
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../config';
import { AudioAbortedError, AudioInputError, denoiseFile, type DenoiseStats, type OutputFormat } from '../audio/pipeline';
import { DEFAULT_MODEL, MODEL_IDS, type ModelId } from '../inference/types';
import { createInferenceEngine } from '../inference/engine';

export const EXIT = { ok: 0, failure: 1, usage: 2, badInput: 3, interrupted: 130 } as const;

export const HELP = `nsm — speech noise suppression (DTLN models, ffmpeg for any input format)

Usage:
  nsm denoise IN [-o OUT] [--model M] [--attenuation-limit L] [--format wav|flac]
                 [--keep-rate | --model-rate] [--json] [--quiet]
  nsm --help

Options:
  -o, --output OUT          output file (default: <IN without extension>_denoised.<format> next to IN)
  -m, --model M             ${MODEL_IDS.join(', ')} (default ${DEFAULT_MODEL})
  -a, --attenuation-limit L maximum noise reduction in dB, 0-100; 0 = remove as much as possible
                            (default: DEFAULT_ATTENUATION_LIMIT_DB, else 0)
  -f, --format wav|flac     16-bit PCM WAV or FLAC (default: from OUT's extension, else wav)
      --keep-rate           write at the input file's sample rate (default)
      --model-rate          write at the model's native rate (16000 Hz, 48000 Hz for nsm-2-hd)
      --json                print the processing stats as JSON on stdout
  -q, --quiet               no progress or summary on stderr

Inputs: anything ffmpeg decodes (WAV, FLAC, OGG/Vorbis, Opus, MP3, M4A/AAC, WebM), any rate, any channel count.
Exit codes: 0 ok, 1 internal failure, 2 usage error, 3 unreadable/unsupported input, 130 interrupted.
Environment: MODELS_DIR, FFMPEG_PATH, WORKERS, DEFAULT_ATTENUATION_LIMIT_DB.
`;

export interface DenoiseArgs {
  input: string;
  output: string;
  model: ModelId;
  attenuationLimitDb: number;
  format: OutputFormat;
  keepInputSampleRate: boolean;
  json: boolean;
  quiet: boolean;
}

export class UsageError extends Error {}

/** Parses `denoise ...` arguments (argv without node and script). */
export function parseDenoiseArgs(argv: string[], defaultAttenuationLimitDb: number): DenoiseArgs {
  let input: string | undefined;
  let output: string | undefined;
  let model: ModelId = DEFAULT_MODEL;
  let limit = defaultAttenuationLimitDb;
  let format: OutputFormat | undefined;
  let keep = true;
  let json = false;
  let quiet = false;
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let inlineValue: string | undefined;
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    if (eq > 0) {
      inlineValue = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const value = (): string => {
      const v = inlineValue ?? argv[++i];
      if (v === undefined || v === '') throw new UsageError(`${arg} needs a value`);
      return v;
    };
    switch (arg) {
      case '-o': case '--output': output = value(); break;
      case '-m': case '--model': {
        const m = value();
        if (!(MODEL_IDS as readonly string[]).includes(m)) throw new UsageError(`unknown model "${m}" (expected one of ${MODEL_IDS.join(', ')})`);
        model = m as ModelId;
        break;
      }
      case '-a': case '--attenuation-limit': case '--attenuation-limit-db': {
        const raw = value();
        const n = Number(raw);
        if (!Number.isFinite(n) || n < 0 || n > 100) throw new UsageError(`--attenuation-limit must be a number from 0 to 100, got "${raw}"`);
        limit = n;
        break;
      }
      case '-f': case '--format': {
        const f = value().toLowerCase();
        if (f !== 'wav' && f !== 'flac') throw new UsageError(`--format must be wav or flac, got "${f}"`);
        format = f;
        break;
      }
      case '--keep-rate': keep = true; break;
      case '--model-rate': keep = false; break;
      case '--json': json = true; break;
      case '-q': case '--quiet': quiet = true; break;
      default:
        if (arg.startsWith('-') && arg !== '-') throw new UsageError(`unknown option ${arg}`);
        if (input !== undefined) throw new UsageError(`unexpected argument "${arg}" (one input file per call)`);
        input = arg;
    }
  }
  if (!input) throw new UsageError('missing input file');
  if (!format) format = output && /\.flac$/i.test(output) ? 'flac' : 'wav';
  if (!output) {
    const parsed = path.parse(input);
    output = path.join(parsed.dir, `${parsed.name}_denoised.${format}`);
  }
  if (path.resolve(output) === path.resolve(input)) throw new UsageError('output would overwrite the input');
  return { input, output, model, attenuationLimitDb: limit, format, keepInputSampleRate: keep, json, quiet };
}

/** Progress on stderr: a redrawn bar on a TTY, otherwise a line every 10 %. Files under 10 s show nothing. */
export function progressReporter(stream: NodeJS.WriteStream): { update(doneS: number, totalS: number | null): void; finish(): void } {
  const tty = !!stream.isTTY;
  let lastDraw = 0;
  let lastDecile = -1;
  let drew = false;
  let lastPlainS = 0;
  return {
    update(doneS, totalS) {
      if (totalS !== null && totalS < 10) return;
      const frac = totalS ? Math.min(1, doneS / totalS) : null;
      if (tty) {
        const now = Date.now();
        if (now - lastDraw < 100) return;
        lastDraw = now;
        const width = 30;
        const line = frac === null
          ? `processed ${doneS.toFixed(1)} s`
          : `[${'#'.repeat(Math.round(frac * width)).padEnd(width, '.')}] ${(frac * 100).toFixed(0).padStart(3)}%  ${doneS.toFixed(1)}/${totalS!.toFixed(1)} s`;
        stream.write(`\r${line}\x1b[K`);
        drew = true;
      } else if (frac !== null) {
        const decile = Math.floor(frac * 10);
        if (decile > lastDecile && decile < 10) {
          lastDecile = decile;
          stream.write(`progress ${decile * 10}% (${doneS.toFixed(1)}/${totalS!.toFixed(1)} s)\n`);
        }
      } else if (doneS - lastPlainS >= 30) {
        lastPlainS = doneS;
        stream.write(`processed ${doneS.toFixed(0)} s\n`);
      }
    },
    finish() {
      if (drew) stream.write('\r\x1b[K');
      else if (lastDecile >= 0) stream.write('progress 100%\n');
    },
  };
}

function summary(args: DenoiseArgs, stats: DenoiseStats): string {
  const ch = stats.channels === 1 ? 'mono' : stats.channels === 2 ? 'stereo' : `${stats.channels} ch`;
  return `wrote ${args.output}: ${stats.duration_s.toFixed(2)} s ${ch} ${stats.output_sample_rate} Hz ${stats.output_format}, ` +
    `${stats.model}, ${stats.processing_s.toFixed(2)} s (rtf ${stats.rtf.toFixed(3)})\n`;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(HELP);
    return command ? EXIT.ok : EXIT.usage;
  }
  if (command !== 'denoise') {
    process.stderr.write(`nsm: unknown command "${command}"\n\n${HELP}`);
    return EXIT.usage;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(HELP);
    return EXIT.ok;
  }

  let config;
  let args: DenoiseArgs;
  try {
    config = loadConfig();
    args = parseDenoiseArgs(rest, config.defaultAttenuationLimitDb);
  } catch (err) {
    process.stderr.write(`nsm: ${(err as Error).message}\nTry "nsm --help".\n`);
    return EXIT.usage;
  }
  if (!fs.existsSync(args.input)) {
    process.stderr.write(`nsm: input not found: ${args.input}\n`);
    return EXIT.badInput;
  }

  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const progress = progressReporter(process.stderr);
  let engine: Awaited<ReturnType<typeof createInferenceEngine>> | null = null;
  try {
    // One file is one stream: a single worker is enough and starts fastest.
    engine = await createInferenceEngine({ ...config, workers: 1 }, { warmUp: false });
    const stats = await denoiseFile({ config, engine }, args.input, args.output, {
      model: args.model,
      attenuationLimitDb: args.attenuationLimitDb,
      outputFormat: args.format,
      keepInputSampleRate: args.keepInputSampleRate,
      signal: controller.signal,
      onProgress: args.quiet ? undefined : (d, t) => progress.update(d, t),
    });
    progress.finish();
    if (!args.quiet) process.stderr.write(summary(args, stats));
    if (args.json) process.stdout.write(`${JSON.stringify({ output: args.output, ...stats })}\n`);
    return EXIT.ok;
  } catch (err) {
    progress.finish();
    if (err instanceof AudioAbortedError) {
      process.stderr.write('nsm: interrupted\n');
      return EXIT.interrupted;
    }
    if (err instanceof AudioInputError) {
      process.stderr.write(`nsm: ${args.input}: ${err.message}\n`);
      return EXIT.badInput;
    }
    process.stderr.write(`nsm: failed: ${(err as Error).message}\n`);
    return EXIT.failure;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await engine?.close().catch(() => undefined);
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`nsm: ${(err as Error).stack ?? err}\n`);
      process.exitCode = EXIT.failure;
    },
  );
}
