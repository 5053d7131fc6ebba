// README.md's shell commands, run as written (issue 39 item 2). Every fenced sh/bash block is split into commands
// (a line with its `\` continuations); each is either run here or named in SKIP with the reason, so a command added
// to the README that is neither makes this test fail. They run in README order, each in its own bash, with the
// variables they set (TOKEN, NSM_URL, ...) carried to the next as one terminal would carry them: `npm` commands in the
// clone, the others in a temporary folder holding the README's inputs. Only the environment is substituted, never a
// command's words (SUBSTITUTE below): the data folder, the loopback port, and `nsm` on the PATH (docs/testing.md).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT } from '../../src/config';
import { probeMedia } from '../../src/audio/probe';
import { closeQuietly, eventually, fixture, listen, rawRequest, wavInfo } from '../helpers/service-helpers';

jest.setTimeout(180_000);

/** The README's shell blocks, each a list of commands (continuations joined, blank and comment-only lines dropped). */
function readmeCommands(markdown: string): string[][] {
  const blocks: string[][] = [];
  const fence = /^```(sh|bash|shell|console)\s*\n([\s\S]*?)^```\s*$/gm;
  for (const match of markdown.matchAll(fence)) {
    const commands: string[] = [];
    let pending = '';
    for (const line of match[2].split('\n')) {
      const joined = pending + line;
      if (joined.endsWith('\\')) {
        pending = joined.slice(0, -1);
        continue;
      }
      pending = '';
      if (joined.trim() && !joined.trim().startsWith('#')) commands.push(joined.trim());
    }
    blocks.push(commands);
  }
  return blocks;
}

/** A command without its trailing comment and with single spaces: how SKIP and CHECKS name it. */
const key = (command: string): string => command.replace(/\s+#\s.*$/, '').replace(/\s+/g, ' ').trim();

// Commands not run here, and why. Each must still be in the README (a stale entry fails the test).
const SKIP: Record<string, string> = {
  // The whole suite; this file is one of its tests.
  'npm test': 'the test suite itself',
  // The same server as `DATA_DIR=/srv/nsm npm start`, which is run; the plain form would write ./data in the clone.
  'npm start': 'runs as its DATA_DIR form',
  // Changes npm's global prefix; the test puts this clone's bin/nsm.js on the PATH as `nsm`, which is what it makes.
  'npm link --ignore-scripts': 'replaced by nsm on the PATH',
  // Needs a container engine and minutes of build; the podman recipe was proven by hand (docs/operations.md).
  'docker build -t nsm . && docker run -d -p 8080:8080 -v nsm-data:/data --init --stop-timeout 75 nsm': 'container',
};

// The server: started in the background before the first command (the reader's `npm start` of the first block),
// stopped at the end.
const SERVER = 'DATA_DIR=/srv/nsm npm start';

let root: string;
let dataDir: string;
let work: string;
let binDir: string;
let state: string;
let port: number;
let server: ChildProcess | undefined;
let serverLog = '';
const config = loadConfig();

/** What the README says a command writes, checked after it ran (paths in the work folder). */
const CHECKS: Record<string, () => Promise<void> | void> = {
  'curl -sS -H "Authorization: Bearer $TOKEN" -F file=@talk.mp3 -o talk_denoised.wav http://localhost:8080/v1/noise-suppressor/denoise':
    () => expect(wavInfo(read('talk_denoised.wav'))).toMatchObject({ sampleRate: 44100, channels: 2 }),
  'nsm denoise interview.mp3': () => expect(wavInfo(read('interview_denoised.wav')).sampleRate).toBe(16000),
  'nsm denoise talk.mp3 -o clean.flac --model nsm-4 --attenuation-limit 20': () => expect(read('clean.flac').subarray(0, 4).toString()).toBe('fLaC'),
  'nsm denoise *.mp3 -d cleaned/ --format mp3 --loudness podcast': () =>
    expect(fs.readdirSync(path.join(work, 'cleaned')).sort()).toEqual(['interview_denoised.mp3', 'talk_denoised.mp3']),
  'nsm denoise lecture.mp4 -o lecture_clean.mp4 --loudness keep': async () => {
    const probe = await probeMedia(config, path.join(work, 'lecture_clean.mp4'));
    expect(probe.streams.map((s) => s.type).sort()).toEqual(['audio', 'video']);
  },
  'nsm denoise interview.mp3 -o interview_tight.wav --trim-silence': () => expect(wavInfo(read('interview_tight.wav')).channels).toBe(1),
  'nsm denoise mic.wav --echo-reference far.wav -o mic_clean.wav': () => expect(wavInfo(read('mic_clean.wav')).sampleRate).toBe(16000),
  'nsm jobs submit talk.mp3 --wait -o talk_job.wav': () => expect(wavInfo(read('talk_job.wav')).channels).toBe(2),
  'nsm stream talk.mp3 -o talk_live.wav --realtime': () => expect(wavInfo(read('talk_live.wav')).sampleRate).toBe(16000),
  'nsm stream call.wav -o call_live.wav --rate 8000 --encoding mulaw': () => expect(wavInfo(read('call_live.wav')).sampleRate).toBe(8000),
};

const read = (name: string): Buffer => fs.readFileSync(path.join(work, name));

/** The environment substituted into a command: the data folder and the loopback port; nothing else changes. */
function substitute(command: string): string {
  return command.replaceAll('/srv/nsm', dataDir).replaceAll('localhost:8080', `127.0.0.1:${port}`);
}

/** The environment every command gets: `nsm` on the PATH, and the server's data folder as DATA_DIR, as the
 *  second terminal of a reader whose server uses the default folder has it. */
function environment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${binDir}:${process.env.PATH}`, DATA_DIR: dataDir, WORKERS: '1' };
  for (const name of ['NSM_URL', 'NSM_TOKEN', 'TOKEN', 'ADMIN_SECRET', 'DATABASE_URL', 'REDIS_URL', 'MODEL_SERVICE_URL']) delete env[name];
  return env;
}

/** Runs one command in bash, with the variables of the commands before it; returns its exit status and output. */
function runCommand(command: string, names: string[]): { code: number; output: string } {
  const cwd = /\bnpm\s/.test(command) ? PROJECT_ROOT : work;
  const script = [`[ -f '${state}' ] && . '${state}'`, 'set -o pipefail', substitute(command), 'status=$?',
    `declare -p ${names.join(' ')} 2>/dev/null > '${state}'`, 'exit $status'].join('\n');
  try {
    const output = execFileSync('bash', ['-c', script], { cwd, env: environment(), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    return { code: 0, output };
  } catch (err) {
    const e = err as { status?: number; stdout?: string; stderr?: string };
    return { code: e.status ?? 1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

async function startServer(command: string): Promise<void> {
  server = spawn('bash', ['-c', substitute(command)], {
    cwd: PROJECT_ROOT,
    env: { ...environment(), PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group: npm, node and the model service's child are stopped together
  });
  server.stdout!.on('data', (d: Buffer) => (serverLog += d.toString()));
  server.stderr!.on('data', (d: Buffer) => (serverLog += d.toString()));
  await eventually(async () => {
    if (server!.exitCode !== null) return true;
    const ready = await rawRequest(`http://127.0.0.1:${port}/readyz`, {}).catch(() => undefined);
    return ready?.status === 200;
  }, 60_000).catch(() => undefined);
  if (server.exitCode !== null || !serverLog.includes('listening on')) throw new Error(`${command} did not start:\n${serverLog}`);
}

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'nsm-readme-'));
  dataDir = path.join(root, 'data');
  work = path.join(root, 'work');
  binDir = path.join(root, 'bin');
  state = path.join(root, 'state.sh');
  fs.mkdirSync(work);
  fs.mkdirSync(binDir);
  fs.symlinkSync(path.join(PROJECT_ROOT, 'bin/nsm.js'), path.join(binDir, 'nsm')); // what `npm link` makes
  const probe = await listen(() => undefined);
  port = Number(new URL(probe.url).port);
  await closeQuietly(probe.server);

  // The README's inputs, from the fixtures: 3 s of noisy speech.
  const ffmpeg = (args: string[]) => execFileSync(config.ffmpegPath, ['-loglevel', 'error', '-y', ...args], { cwd: work });
  fs.copyFileSync(fixture('speech-noisy-44k1-stereo.mp3'), path.join(work, 'talk.mp3'));
  ffmpeg(['-i', fixture('speech-noisy-16k-mono.wav'), '-c:a', 'libmp3lame', '-b:a', '32k', 'interview.mp3']);
  ffmpeg(['-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=25:duration=3', '-i', fixture('speech-noisy-44k1-stereo.wav'),
    '-c:v', 'libx264', '-preset', 'ultrafast', '-c:a', 'aac', '-shortest', 'lecture.mp4']);
  fs.copyFileSync(fixture('speech-noisy-16k-mono.wav'), path.join(work, 'call.wav'));
  fs.copyFileSync(fixture('speech-noisy-16k-mono.wav'), path.join(work, 'mic.wav'));
  fs.copyFileSync(fixture('speech-noisy-48k-mono.wav'), path.join(work, 'far.wav'));
});

afterAll(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server!.once('exit', r));
    process.kill(-server.pid!, 'SIGTERM');
    await exited;
  }
  fs.rmSync(root, { recursive: true, force: true });
});

test('every shell command of README.md runs as written, or is skipped for a stated reason', async () => {
  const blocks = readmeCommands(fs.readFileSync(path.join(PROJECT_ROOT, 'README.md'), 'utf8'));
  const all = blocks.flat().map(key);
  // Every skip and every check names a command the README still has, and the server command is there.
  expect(Object.keys(SKIP).filter((k) => !all.includes(k))).toEqual([]);
  expect(Object.keys(CHECKS).filter((k) => !all.includes(k))).toEqual([]);
  expect(all).toContain(SERVER);
  // The variables the commands set, carried from one to the next.
  const names = [...new Set(blocks.flat().flatMap((c) => [...c.matchAll(/(?:^|\s)(?:export\s+)?([A-Z_][A-Z0-9_]*)=/g)].map((m) => m[1])))]
    .filter((n) => n !== 'DATA_DIR');

  // The reader's server runs from the first block on (`npm start`); its DATA_DIR form stands in for it from the start.
  await startServer(blocks.flat().find((c) => key(c) === SERVER)!);
  const ran: string[] = [];
  for (const command of blocks.flat()) {
    const k = key(command);
    if (k in SKIP) continue;
    if (k === SERVER) {
      ran.push(k); // started above
      continue;
    }
    const { code, output } = runCommand(command, names);
    if (code !== 0) throw new Error(`README command failed (exit ${code}): ${command}\n${output}`);
    await CHECKS[k]?.();
    if (/^TOKEN=/.test(k)) {
      // The key just made works against the server at once (the server and the keys CLI share the data folder).
      const token = /TOKEN=["']?(mw_live_\w+)/.exec(fs.readFileSync(state, 'utf8'))?.[1];
      expect(token).toMatch(/^mw_live_/);
      const health = await rawRequest(`http://127.0.0.1:${port}/v1/noise-suppressor/health`, { headers: { Authorization: `Bearer ${token}` } });
      expect(health.status).toBe(200);
    }
    ran.push(k);
  }
  // Everything the README has was run or skipped; the checks all ran.
  expect(ran.length + Object.keys(SKIP).length).toBe(all.length);
  expect(Object.keys(CHECKS).filter((k) => !ran.includes(k))).toEqual([]);
});
