// Helpers for the jobs tests: the job-store engines the contract runs against, polling a job, a webhook receiver.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { openPostgresJobStore } from '../../src/store/jobs/postgres';
import { openSqliteJobStore } from '../../src/store/jobs/sqlite';
import { startPostgres, type PostgresServer } from './real-servers';
import type { JobStore } from '../../src/store/jobs/types';

export interface JobStoreEngine {
  name: string;
  /** A brand-new, empty queue. */
  open(): Promise<JobStore>;
  cleanup(): Promise<void>;
}

let pg: PostgresServer | null = null;
let pgDatabases = 0;

/** The PostgreSQL server the job-store tests share (started from Debian's packages on first use). */
export async function jobsPostgres(): Promise<PostgresServer> {
  pg ??= await startPostgres();
  return pg;
}

/** Stops the shared PostgreSQL server (call in afterAll of a file that used jobStoreEngines or jobsPostgres). */
export async function stopJobsPostgres(): Promise<void> {
  await pg?.stop();
  pg = null;
}

/** A fresh database on the shared server. */
export async function freshJobsDatabase(): Promise<string> {
  return (await jobsPostgres()).createDatabase(`jobs_${process.pid}_${++pgDatabases}`);
}

/** Every engine the contract tests run against: SQLite (jobs.db) and a real PostgreSQL. */
export function jobStoreEngines(): JobStoreEngine[] {
  let dir: string | null = null;
  const sqlite: JobStoreEngine = {
    name: 'sqlite',
    async open() {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobs-store-'));
      return openSqliteJobStore(dir);
    },
    async cleanup() {
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
      dir = null;
    },
  };
  const postgres: JobStoreEngine = {
    name: 'postgres',
    async open() {
      return openPostgresJobStore({ databaseUrl: await freshJobsDatabase(), poolSize: 8 });
    },
    async cleanup() {
      // Each test has its own database; the server goes at the end of the file (stopJobsPostgres).
    },
  };
  return [sqlite, postgres];
}

export async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** Polls until `check` returns a value (not undefined), or throws after `timeoutMs`. */
export async function until<T>(check: () => Promise<T | undefined>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(everyMs);
  }
}

export interface ReceivedHook {
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

/** A webhook receiver on loopback; `status()` decides each answer (e.g. fail the first ones). */
export async function startReceiver(status: (n: number) => number = () => 204): Promise<{
  url: string;
  received: ReceivedHook[];
  close(): Promise<void>;
}> {
  const received: ReceivedHook[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      res.statusCode = status(received.length);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hooks/ns`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A receiver's check of X-NS-Signature written from the documented format alone (not the server's helper):
 * t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>.
 */
export function signatureValid(secret: string, header: string | undefined, body: string, toleranceS = 300): boolean {
  if (!header) return false;
  const fields = Object.fromEntries(header.split(',').map((kv) => kv.split('=') as [string, string]));
  const t = Number(fields.t);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceS) return false;
  const want = crypto.createHmac('sha256', secret).update(`${fields.t}.${body}`).digest('hex');
  return typeof fields.v1 === 'string' && fields.v1.length === want.length && crypto.timingSafeEqual(Buffer.from(fields.v1), Buffer.from(want));
}

/**
 * Seconds of audio for the jobs that a test kills mid-run (nsm-4): long enough that the job is still running after its
 * first progress write (once a second) and a second gateway's start; 240 s took ~2.3 s on a fast 2-core machine,
 * too close to that for a faster one.
 */
export const LONG_S = 480;

/** A WAV of `seconds` of speech-like noise (generated by ffmpeg), for jobs long enough to interrupt. */
export function makeLongWav(ffmpeg: string, file: string, seconds: number, rate = 16000): void {
  const r = spawnSync(ffmpeg, [
    '-loglevel', 'error', '-y',
    '-f', 'lavfi', '-i', `anoisesrc=color=pink:amplitude=0.2:duration=${seconds}:sample_rate=${rate}`,
    '-f', 'lavfi', '-i', `sine=frequency=220:duration=${seconds}:sample_rate=${rate}`,
    '-filter_complex', 'amix=inputs=2:duration=shortest', '-ac', '1', '-ar', String(rate), '-c:a', 'pcm_s16le', file,
  ]);
  if (r.status !== 0) throw new Error(`ffmpeg failed: ${r.stderr.toString()}`);
}
