// How long an input really is, learnt from its packets without decoding them: one `ffmpeg -c copy -f null` run over
// the first audio stream. A container's duration field can be missing (FLAC written to a pipe, a streamed WAV) or
// wrong (an MP3 without a Xing header is estimated from its first bitrate, a chained Ogg reports its last link), and
// the file pipeline would otherwise find out only by decoding and denoising up to MAX_AUDIO_SECONDS of it.
import type { ChildProcess } from 'node:child_process';
import { AudioInputError } from './errors';
import { killChild, spawnFfmpeg, untrustedInputArgs, waitForExit } from './ffmpeg';

/** A scan counts at most this much past the limit: enough to tell "too long" without reading hours more. */
export const SCAN_PAST_LIMIT_S = 2;

/** As long as ffmpeg may take to describe an input before decoding (FfmpegSource's header bound). */
export const SCAN_TIMEOUT_MS = 30_000;

export interface DurationScan {
  /**
   * Seconds of audio in the first audio stream's packets, counted up to maxSeconds + SCAN_PAST_LIMIT_S; null when
   * ffmpeg could not read them (the decoder reports why). Rejects with AudioInputError when the scan ran out of time.
   */
  readonly seconds: Promise<number | null>;
  /** Kills the scan if it is still running and resolves once it has exited (no ffmpeg outlives it); safe to call repeatedly. */
  stop(): Promise<void>;
}

/** Starts the scan; it runs beside whatever the caller does meanwhile (the decoder's start). */
export function startDurationScan(ffmpegPath: string, inputPath: string, maxSeconds: number, timeoutMs = SCAN_TIMEOUT_MS): DurationScan {
  const child: ChildProcess = spawnFfmpeg(ffmpegPath, [
    // A chained Ogg makes the null muxer log one line per link: nothing of stderr is used.
    '-nostats', '-loglevel', 'fatal',
    ...untrustedInputArgs(),
    '-i', inputPath,
    '-map', '0:a:0', '-vn', '-sn', '-dn',
    '-c', 'copy', '-t', String(maxSeconds + SCAN_PAST_LIMIT_S),
    // key=value lines on stdout, the last block ending "progress=end" once every packet was counted.
    '-progress', 'pipe:1', '-f', 'null', '-',
  ]);
  child.stdin!.on('error', () => undefined);
  child.stdin!.end();
  child.stderr!.resume();
  let lastUs: number | null = null;
  let ended = false;
  let partial = '';
  child.stdout!.on('data', (d: Buffer) => {
    const lines = (partial + d.toString('latin1')).split('\n');
    partial = lines.pop()!.slice(-256);
    for (const line of lines) {
      if (line.startsWith('out_time_us=')) {
        const us = Number(line.slice(12));
        if (Number.isFinite(us)) lastUs = us;
      } else if (line.startsWith('progress=end')) ended = true;
    }
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killChild(child);
  }, timeoutMs);
  const seconds = waitForExit(child).then(
    ({ code }) => {
      clearTimeout(timer);
      if (timedOut) {
        throw new AudioInputError(`could not tell how long the audio is within ${timeoutMs / 1000} s (its packets are too many or too slow to read)`);
      }
      return code === 0 && ended && lastUs !== null ? Math.max(0, lastUs) / 1e6 : null;
    },
    () => {
      clearTimeout(timer);
      return null;
    },
  );
  const exited = seconds.then(
    () => undefined,
    () => undefined,
  ); // also why a caller that stops early needs no handler of its own
  return {
    seconds,
    stop: () => {
      killChild(child);
      return exited;
    },
  };
}
