// Chaos suite, live streams (issue 35; `npm run chaos -- --phases 6`): real gateways (`node dist/src/server.js`, the
// file-work process as npm start runs it) and WebSocket clients that misbehave: a `null` message, an upgrade header
// on /denoise with the client gone and SIGTERM after it, audio and end before `ready`, credits running out
// mid-stream, no Sec-WebSocket-Key, a key revoked mid-stream (the keys CLI), a client that never reads, thousands of
// tiny messages, kill -9 of the file-work process during streams, and SIGTERM with streams open. Each row states what
// must happen and what was measured.
import { execFile } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import WebSocket from 'ws';
import { hashToken } from '../../src/store/gateway/tokens';
import type { Ctx, Tenant } from './context';
import { multipart, sleep } from './http';
import { childrenOf, kill9, startGateway, type Proc } from './procs';
import { DENOISE } from './endpoints';

const STREAM = '/v1/noise-suppressor/stream';

interface Run {
  ready: boolean;
  audio: Buffer[];
  bytes: number;
  errors: Array<{ type: string; message: string }>;
  done: Record<string, number> | null;
  code: number | null;
  readyAt: number;
  /** When the script started (on `open` for early scripts). */
  scriptAt: number;
}

/** A stream client: `script` runs on `open` (before ready) or on `ready`; resolves at close (or after `deadlineMs`). */
function stream(gw: Proc, t: Tenant, query: string, script: (ws: WebSocket, run: Run) => void | Promise<void>, opts: { early?: boolean; deadlineMs?: number } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const run: Run = { ready: false, audio: [], bytes: 0, errors: [], done: null, code: null, readyAt: 0, scriptAt: 0 };
    const go = (): void => {
      run.scriptAt = Date.now();
      void script(ws, run);
    };
    const ws = new WebSocket(`ws://127.0.0.1:${gw.port}${STREAM}${query}`, { headers: { Authorization: `Bearer ${t.token}` }, perMessageDeflate: false });
    const deadline = setTimeout(() => ws.terminate(), opts.deadlineMs ?? 60_000);
    ws.on('error', () => undefined);
    ws.on('unexpected-response', (_q, res) => {
      run.code = res.statusCode ?? 0;
      res.resume();
    });
    if (opts.early) ws.once('open', go);
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        run.audio.push(Buffer.from(data as Buffer));
        run.bytes += (data as Buffer).length;
        return;
      }
      const msg = JSON.parse(String(data)) as { type: string; error?: Run['errors'][0]; stats?: Record<string, number> };
      if (msg.type === 'ready') {
        run.ready = true;
        run.readyAt = Date.now();
        if (!opts.early) go();
      } else if (msg.type === 'error') run.errors.push(msg.error!);
      else if (msg.type === 'done') run.done = msg.stats!;
    });
    ws.on('close', (code) => {
      clearTimeout(deadline);
      run.code ??= code;
      resolve(run);
    });
  });
}

/** 16 kHz mono s16 noise, deterministic (`seconds` of it). */
function pcm(seconds: number): Buffer {
  const b = Buffer.alloc(Math.round(seconds * 16000) * 2);
  let x = 4242;
  for (let i = 0; i < b.length / 2; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    b.writeInt16LE(((x >> 8) % 8000) - 4000, 2 * i);
  }
  return b;
}

const wavOf = (data: Buffer): Buffer => {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(16000, 24);
  h.writeUInt32LE(32000, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
};

/** The PCM /denoise gives for `data` (nsm-2, 16 kHz WAV): what a stream of it must equal. */
async function denoised(ctx: Ctx, gw: Proc, t: Tenant, data: Buffer): Promise<Buffer | null> {
  const form = multipart([{ name: 'model', value: 'nsm-2' }, { name: 'file', filename: 'a.wav', data: wavOf(data) }]);
  const r = await ctx.api(gw, t, DENOISE, { method: 'POST', headers: { 'Content-Type': form.contentType, 'Content-Length': form.body.length }, body: form.body, label: 'stream reference' });
  return r.status === 200 ? dataChunk(r.body) : null;
}

/** The samples of a WAV (its data chunk). */
function dataChunk(wav: Buffer): Buffer | null {
  for (let off = 12; off + 8 <= wav.length; ) {
    const size = wav.readUInt32LE(off + 4);
    if (wav.toString('ascii', off, off + 4) === 'data') return wav.subarray(off + 8, off + 8 + size);
    off += 8 + size + (size % 2);
  }
  return null;
}

function sendAll(ws: WebSocket, data: Buffer, size: number, end = true): void {
  for (let o = 0; o < data.length; o += size) ws.send(data.subarray(o, o + size));
  if (end) ws.send('{"type":"end"}');
}

/** Real time: 20 ms messages every 20 ms for `seconds`, then end (unless the stream closed first). */
async function realTime(ws: WebSocket, seconds: number, end = true): Promise<void> {
  const frame = pcm(0.02);
  for (let i = 0; i < seconds * 50 && ws.readyState === WebSocket.OPEN; i++) {
    ws.send(frame);
    await sleep(20);
  }
  if (end && ws.readyState === WebSocket.OPEN) ws.send('{"type":"end"}');
}

const same = (run: Run, expected: Buffer | null): boolean => expected !== null && Buffer.compare(Buffer.concat(run.audio), expected) === 0;

/** Writes `request` on a raw socket, destroys it after `holdMs`; the answer's status line, if any. */
function rawUpgrade(gw: Proc, request: string, body: Buffer, holdMs: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(gw.port, '127.0.0.1');
    let answer = '';
    s.on('error', () => undefined);
    s.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    s.on('connect', () => s.end(Buffer.concat([Buffer.from(request), body])));
    setTimeout(() => {
      s.destroy();
      resolve(answer);
    }, holdMs);
  });
}

export async function runStreamRows(ctx: Ctx, env: NodeJS.ProcessEnv, dataDir: string): Promise<void> {
  // Renewals (and so the key re-checks) every second; streams idle out after 3 s.
  const gwEnv = { ...env, CREDIT_RESERVATION_TTL_MS: '3000', SHUTDOWN_GRACE_MS: '2000' };
  let gw = await startGateway('gw-streams', gwEnv);
  const files = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const t = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });

  // 35.5 first: the live worker starts with the first stream, so `ready` takes a while.
  const early = pcm(3);
  const before = await stream(gw, t, '?model=nsm-2', (ws, run) => sendAll(ws, early, 1280), { early: true });
  const sentBeforeReady = before.scriptAt > 0 && before.readyAt >= before.scriptAt;
  const ref = await denoised(ctx, gw, files, early);
  ctx.add({
    item: '35.5', title: 'stream: 3 s of audio and end sent before ready',
    pass: before.code === 1000 && before.bytes === early.length && same(before, ref) && sentBeforeReady,
    detail: `sent ${before.readyAt - before.scriptAt} ms before ready; close ${before.code}, ${before.bytes} of ${early.length} bytes back, equal to /denoise: ${same(before, ref)} (target: 1000, all of it, equal)`,
  });

  // 35.1: any JSON that is not the end object, then a normal stream.
  const texts = ['null', '5', '[]', '"end"', '{"type":null}', '['.repeat(100_000) + ']'.repeat(100_000)];
  const odd = await Promise.all(texts.map((x) => stream(gw, t, '', (ws) => ws.send(x))));
  const after = await stream(gw, t, '?model=nsm-2', (ws) => sendAll(ws, early, 640));
  ctx.add({
    item: '35.1', title: 'stream: text messages null, 5, [], "end", {"type":null}, 100k-deep array',
    pass: odd.every((r) => r.code === 1007 && r.errors[0]?.type === 'invalid_request') && gw.alive() && same(after, ref),
    detail: `closes ${odd.map((r) => `${r.code}/${r.errors[0]?.type}`).join(', ')}; gateway ${gw.alive() ? 'alive' : 'DEAD'}; a stream afterwards equal to /denoise: ${same(after, ref)} (target: 1007 invalid_request each, alive, equal)`,
  });

  // 35.9: an upgrade without Sec-WebSocket-Key.
  const noKey = await rawUpgrade(gw, `GET ${STREAM} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.token}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n`, Buffer.alloc(0), 1500);
  ctx.add({
    item: '35.9', title: 'stream upgrade without Sec-WebSocket-Key',
    pass: /^HTTP\/1\.1 400 /.test(noKey) && /\r\nx-request-id: req_/i.test(noKey) && noKey.includes('"invalid_request"'),
    detail: `${noKey.split('\r\n')[0]}, X-Request-Id ${/\r\nx-request-id: req_/i.test(noKey) ? 'present' : 'MISSING'}, envelope ${noKey.includes('"error"') ? 'yes' : 'no'} (target: 400 envelope with X-Request-Id)`,
  });

  // 35.8: one credit, 75 s streamed as fast as the server takes it.
  const poor = await ctx.tenant(dataDir, 'enterprise', { credits: 1, rpm: 100_000 });
  const minuteAndMore = pcm(75);
  const broke = await stream(gw, poor, '?model=nsm-1', (ws) => sendAll(ws, minuteAndMore, 32_000, false));
  const charged = await poor.store.creditsUsed(poor.workspaceId, new Date());
  const msg = broke.errors[0]?.message ?? '';
  ctx.add({
    item: '35.8', title: 'stream: credits run out mid-stream (1 credit, 75 s sent)',
    pass: broke.code === 4402 && broke.bytes === 60 * 32000 && /used up/.test(msg) && charged === 1,
    detail: `close ${broke.code} after ${(broke.bytes / 32000).toFixed(2)} s of output; "${msg.slice(0, 90)}"; charged ${charged} (target: 4402, 60 s flushed, "used up", 1 credit)`,
  });

  // 35.10: the key revoked with the keys CLI while its stream runs in real time.
  const victim = await ctx.tenant(dataDir, 'enterprise', { credits: 100_000, rpm: 100_000 });
  const id = (await victim.store.findTokenByHash(hashToken(victim.token)))!.id;
  let revokedAt = 0;
  const revoked = await stream(gw, victim, '', async (ws) => {
    setTimeout(() => {
      revokedAt = Date.now();
      execFile(process.execPath, [path.join(__dirname, '../../src/cli/keys.js'), 'revoke', id], { env: { ...process.env, DATA_DIR: dataDir } }, () => undefined);
    }, 1000);
    await realTime(ws, 20, false);
  });
  const afterRevoke = (Date.now() - revokedAt) / 1000;
  ctx.add({
    item: '35.10', title: 'stream: key revoked (keys revoke) mid-stream; renewal every 1 s',
    pass: revoked.code === 4401 && revoked.errors[0]?.type === 'key_revoked' && afterRevoke < 4,
    detail: `close ${revoked.code} ${revoked.errors[0]?.type ?? ''} ~${afterRevoke.toFixed(1)} s after the CLI started (target: 4401 key_revoked within a renewal period + the CLI's start)`,
  });

  // A client that never reads its output while sending fast: 4408, the gateway's memory bounded.
  const rss0 = gw.rssKb() ?? 0;
  const deaf = await stream(gw, t, '?model=nsm-1', async (ws) => {
    (ws as unknown as { _socket: net.Socket })._socket.pause();
    const chunk = pcm(1);
    const until = Date.now() + 10_000;
    while (Date.now() < until && ws.readyState === WebSocket.OPEN) {
      if (ws.bufferedAmount < 256 * 1024) ws.send(chunk);
      await sleep(5);
    }
    (ws as unknown as { _socket: net.Socket })._socket.resume();
  }, { deadlineMs: 60_000 });
  const rss1 = gw.rssKb() ?? 0;
  ctx.add({
    item: '35.s1', title: 'stream: a client that never reads its output',
    pass: deaf.code === 4408 && deaf.errors[0]?.type === 'request_timeout' && rss1 - rss0 < 100_000,
    detail: `close ${deaf.code} ${deaf.errors[0]?.type ?? ''}; gateway RSS ${Math.round(rss0 / 1024)} → ${Math.round(rss1 / 1024)} MB (target: 4408 request_timeout, RSS growth < 100 MB)`,
  });

  // Thousands of tiny messages: 4 streams of 10,000 one-sample messages each.
  const tinyPcm = pcm(10_000 / 16000);
  const tinyRef = await denoised(ctx, gw, files, tinyPcm);
  const t0 = Date.now();
  const tiny = await Promise.all(Array.from({ length: 4 }, () => stream(gw, t, '?model=nsm-2', (ws) => sendAll(ws, tinyPcm, 2))));
  ctx.add({
    item: '35.s2', title: 'stream: 4 streams × 10,000 messages of one sample each',
    pass: tiny.every((r) => r.code === 1000 && same(r, tinyRef)) && gw.alive(),
    detail: `closes ${tiny.map((r) => r.code).join('/')}, each equal to /denoise: ${tiny.every((r) => same(r, tinyRef))}, ${((Date.now() - t0) / 1000).toFixed(1)} s (target: 1000, equal)`,
  });

  // Speech events with an echo reference (2026-12-02: that stream's first tick once failed every stream of the tick),
  // beside a plain speech stream: both whole.
  const mono = pcm(3);
  const stereo = Buffer.alloc(mono.length * 2);
  for (let i = 0; i < mono.length / 2; i++) {
    stereo.writeInt16LE(mono.readInt16LE(2 * i), 4 * i);
    stereo.writeInt16LE(mono.readInt16LE(2 * ((i + 8000) % (mono.length / 2))), 4 * i + 2);
  }
  const [echoVad, plainVad] = await Promise.all([
    stream(gw, t, '?model=nsm-2&channels=2&echo_reference=last&vad=true', (ws) => sendAll(ws, stereo, 1280)),
    stream(gw, t, '?model=nsm-2&vad=true', (ws) => sendAll(ws, mono, 640)),
  ]);
  const whole = (r: Run): boolean => r.code === 1000 && r.errors.length === 0 && r.bytes === mono.length;
  ctx.add({
    item: '36.v', title: 'stream: vad=true with echo_reference=last, beside a plain vad=true stream',
    pass: whole(echoVad) && whole(plainVad) && gw.alive(),
    detail: `echo+vad ${echoVad.code} ${echoVad.errors[0]?.type ?? ''} ${echoVad.bytes}/${mono.length} bytes; vad ${plainVad.code} ${plainVad.errors[0]?.type ?? ''} ${plainVad.bytes}/${mono.length} bytes (target: 1000 and every byte, both)`,
  });

  // kill -9 of the file-work process while 3 streams run in real time: they go on.
  const child = childrenOf(gw.child.pid!).find((c) => c.comm === 'node' || c.comm.startsWith('node'));
  const during = Promise.all(Array.from({ length: 3 }, () => stream(gw, t, '', (ws) => realTime(ws, 4))));
  await sleep(1000);
  if (child) process.kill(child.pid, 'SIGKILL');
  const survived = await during;
  ctx.add({
    item: '35.s3', title: 'kill -9 of the file-work process during 3 live streams',
    pass: !!child && survived.every((r) => r.code === 1000 && r.bytes === 4 * 32000) && gw.alive(),
    detail: `${child ? `killed pid ${child.pid}` : 'NO CHILD FOUND'}; streams ${survived.map((r) => `${r.code}/${(r.bytes / 32000).toFixed(2)} s`).join(', ')}; gateway ${gw.alive() ? 'alive' : 'DEAD'} (target: 1000 with all 4 s each)`,
  });

  // SIGTERM with two streams open: the short one finishes (1000), the long one gets 1012 at the grace; exit 0.
  const short = stream(gw, t, '', (ws) => realTime(ws, 1));
  const long = stream(gw, t, '', (ws) => realTime(ws, 30));
  await sleep(500);
  gw.expectExit();
  const sig = Date.now();
  gw.child.kill('SIGTERM');
  const [s1, s2] = await Promise.all([short, long]);
  const { code } = await gw.exited;
  ctx.add({
    item: '35.s4', title: 'SIGTERM with 2 streams open (grace 2 s)',
    pass: s1.code === 1000 && s2.code === 1012 && s2.errors[0]?.type === 'upstream_unavailable' && code === 0,
    detail: `short ${s1.code}, long ${s2.code} ${s2.errors[0]?.type ?? ''}; exit ${code} after ${((Date.now() - sig) / 1000).toFixed(1)} s (target: 1000, 1012, exit 0)`,
  });

  // 35.2 and 35.3: POST /denoise with Upgrade and a body, client gone (x5); ordinary calls; then SIGTERM.
  gw = await startGateway('gw-streams-2', gwEnv);
  const wav = wavOf(pcm(1));
  const form = multipart([{ name: 'file', filename: 'a.wav', data: wav }]);
  const head = `POST ${DENOISE} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${files.token}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Type: ${form.contentType}\r\nContent-Length: ${form.body.length}\r\n\r\n`;
  const upgrades = await Promise.all(Array.from({ length: 5 }, () => rawUpgrade(gw, head, form.body, 1000)));
  const u0 = Date.now();
  const plain = await Promise.all(
    Array.from({ length: 4 }, () => ctx.api(gw, files, DENOISE, { method: 'POST', headers: { 'Content-Type': form.contentType, 'Content-Length': form.body.length }, body: form.body, label: 'after upgrade calls' })),
  );
  ctx.add({
    item: '35.2', title: 'POST /denoise with Connection: Upgrade + a body, client gone (x5), then 4 ordinary calls',
    pass: upgrades.every((a) => /^HTTP\/1\.1 400 /.test(a) && /\r\nx-request-id: req_/i.test(a)) && plain.every((r) => r.status === 200),
    detail: `upgrade calls answered ${upgrades.map((a) => a.split(' ')[1] ?? 'nothing').join('/')}; ordinary calls ${plain.map((r) => r.status).join('/')} in ${((Date.now() - u0) / 1000).toFixed(1)} s (target: 400 envelope at once; 200s at once)`,
  });
  await Promise.all(Array.from({ length: 4 }, () => rawUpgrade(gw, head, form.body, 200)));
  gw.expectExit();
  const s0 = Date.now();
  gw.child.kill('SIGTERM');
  const exit = await Promise.race([gw.exited, sleep(30_000).then(() => null)]);
  ctx.add({
    item: '35.3', title: 'SIGTERM right after such calls (grace 2 s)',
    pass: exit?.code === 0,
    detail: exit ? `exit ${exit.code} after ${((Date.now() - s0) / 1000).toFixed(1)} s (target: exit 0, at the latest after the grace + flush)` : 'still running after 30 s (killed)',
  });
  if (!exit) await kill9(gw);
}
