// Small helpers around spawning the ffmpeg and ffprobe binaries directly (ffprobe from @ffprobe-installer: probe.ts).
import os from 'node:os';
import { spawn, type ChildProcess } from 'node:child_process';
import { idleCommandLine } from '../config/system-tools';
import { AudioPipelineError } from './errors';

/** Keeps only the last `limit` characters of a child's stderr so a chatty ffmpeg cannot grow memory. */
export class StderrTail {
  private text = '';
  constructor(private readonly limit = 8192) {}
  push(chunk: Buffer | string): void {
    this.text += chunk.toString();
    if (this.text.length > this.limit * 2) this.text = this.text.slice(-this.limit);
  }
  toString(): string {
    return this.text.slice(-this.limit);
  }
  /** Last meaningful lines, for error messages. */
  summary(maxLines = 3): string {
    const lines = this.toString()
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l && !/^(Press \[q\]|\[q\] command|size=|video:|Stream mapping|Output #|Input #|Metadata:|Duration:|Stream #|encoder\s*:|\s*handler_name)/i.test(l));
    return lines.slice(-maxLines).join('; ');
  }
}

/**
 * Demuxers an uploaded file may be opened with. Without a whitelist ffmpeg would also accept playlists (HLS, concat)
 * that make it open other files on the server, so an upload could read server files back as "audio".
 */
export const INPUT_DEMUXERS = [
  'wav', 'w64', 'flac', 'ogg', 'mp3', 'mov', 'matroska', 'aac', 'aiff', 'caf', 'wv', 'ape', 'asf', 'amr', 'au', 'tta',
  'ac3', 'eac3', 'dts', 'mpc', 'dsf', 'voc', 'xwma', 'tak', 'shn', 'truehd', 'mlp',
];

/** Input options that restrict what an untrusted input file can make ffmpeg do; put them before `-i`. */
export function untrustedInputArgs(): string[] {
  return ['-format_whitelist', INPUT_DEMUXERS.join(','), '-protocol_whitelist', 'file'];
}

/**
 * Which ffmpeg, and the priority to run it at (FILE_WORK_NICE, FILE_WORK_IDLE: file work yields the CPU to live
 * streams, as the file workers do: inference/thread-priority.ts).
 */
export interface FfmpegTool {
  ffmpegPath: string;
  fileWorkNice?: number;
  fileWorkIdle?: boolean;
}

export function spawnFfmpeg(tool: string | FfmpegTool, args: string[]): ChildProcess {
  const settings = typeof tool === 'string' ? { ffmpegPath: tool } : tool;
  return spawnAtFileWorkPriority(settings, settings.ffmpegPath, ['-hide_banner', '-nostdin', ...args]);
}

/** ffprobe, at the same priority as ffmpeg (ffprobe reads no stdin: it has no -nostdin). */
export function spawnFfprobe(tool: FfmpegTool & { ffprobePath: string }, args: string[]): ChildProcess {
  return spawnAtFileWorkPriority(tool, tool.ffprobePath, ['-hide_banner', ...args]);
}

function spawnAtFileWorkPriority(tool: FfmpegTool, binary: string, argv: string[]): ChildProcess {
  const { fileWorkNice = 0, fileWorkIdle = false } = tool;
  const child = spawn(...idleCommandLine(fileWorkIdle, binary, argv), { stdio: ['pipe', 'pipe', 'pipe'] });
  if (fileWorkNice > 0 && child.pid !== undefined) {
    try {
      os.setPriority(child.pid, fileWorkNice);
    } catch {
      // Already gone, or not permitted: it runs at the server's priority.
    }
  }
  return child;
}

/**
 * Writes `bytes` to the child's stdin and, when the pipe is full, waits for it to drain (or for the child to close):
 * whoever feeds ffmpeg holds at most one buffer of its own.
 */
export async function writeToChild(child: ChildProcess, bytes: Buffer): Promise<void> {
  const stdin = child.stdin!;
  if (stdin.write(bytes)) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      stdin.off('drain', done);
      child.off('close', done);
      resolve();
    };
    stdin.on('drain', done);
    child.on('close', done);
  });
}

/** Resolves with the exit code (or null plus the signal) once the child has exited and its pipes closed. */
export function waitForExit(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve({ code: child.exitCode, signal: child.signalCode });
      return;
    }
    child.once('error', (err) => reject(new AudioPipelineError(`could not run ffmpeg: ${err.message}`, { cause: err })));
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
}

/**
 * Kills a child that is still running and discards its pipes (a paused stdout with unread data would otherwise never
 * end, and the child's 'close', which waitForExit waits for, would never come); safe to call more than once.
 */
export function killChild(child: ChildProcess | null | undefined): void {
  if (!child) return;
  if (child.exitCode === null && child.signalCode === null) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
  child.stdout?.destroy();
  child.stdin?.destroy();
}
