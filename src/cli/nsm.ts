// `nsm`: the command line. Subcommands are entries of SUBCOMMANDS (a summary and a run function), each in its own
// module: `nsm denoise` (denoise.ts), `nsm jobs` (jobs.ts), `nsm stream` (stream.ts).
import { usageLine } from './args';
import { DENOISE_HELP, EXIT, runDenoise } from './denoise';
import { runJobsCli } from './jobs';
import { runStreamCli } from './stream';

export { DENOISE_HELP, EXIT, OUTPUT_EXTENSIONS, OUTPUT_FORMATS, parseDenoiseArgs, runDenoise, summaryLine, UsageError } from './denoise';
export type { DenoiseArgs, DenoiseJob } from './denoise';

/** `nsm stream ...` (src/cli/stream.ts): Ctrl-C or SIGTERM ends the stream and leaves no output (exit 130). */
async function runStreamCommand(argv: string[]): Promise<number> {
  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    return await runStreamCli(argv, { out: process.stdout, err: process.stderr, env: process.env, signal: controller.signal });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** `nsm jobs ...` (src/cli/jobs.ts), interruptible with Ctrl-C. */
async function runJobsCommand(argv: string[]): Promise<number> {
  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once('SIGINT', onSignal);
  try {
    return await runJobsCli(argv, { out: process.stdout, err: process.stderr, signal: controller.signal });
  } finally {
    process.off('SIGINT', onSignal);
  }
}


export interface Subcommand {
  usage: string;
  summary: string;
  run(argv: string[]): Promise<number>;
}

/** The subcommands of nsm; `nsm help` lists them in this order. */
export const SUBCOMMANDS: Record<string, Subcommand> = {
  denoise: {
    usage: 'nsm denoise IN... [options]',
    summary: 'remove background noise from audio files (or stdin with -)',
    run: (argv) => runDenoise(argv),
  },
  jobs: {
    usage: 'nsm jobs <command> ...',
    summary: 'long recordings as jobs on a server: submit, status, list, wait, download, cancel',
    run: (argv) => runJobsCommand(argv),
  },
  stream: {
    usage: 'nsm stream IN -o OUT [--realtime]',
    summary: 'denoise a file or stdin through a server\'s live stream (WebSocket), optionally in real time',
    run: (argv) => runStreamCommand(argv),
  },
};

export function helpText(): string {
  const lines = ['nsm — speech noise suppression (DTLN models, ffmpeg for any input format)', '', 'Usage:'];
  for (const cmd of Object.values(SUBCOMMANDS)) lines.push(`  ${cmd.usage.padEnd(34)} ${cmd.summary}`);
  lines.push('  nsm --help', '', 'Run "nsm <command> --help" for a command\'s options.', '');
  return lines.join('\n');
}

export const HELP = `${helpText()}\n${DENOISE_HELP}`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(helpText());
    return command ? EXIT.ok : EXIT.usage;
  }
  const sub = SUBCOMMANDS[command];
  if (!sub) {
    process.stderr.write(usageLine('nsm', command.startsWith('-') ? `unknown option ${command}` : `unknown command "${command}"`, 'nsm --help') + '\n');
    return EXIT.usage;
  }
  return sub.run(rest);
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
