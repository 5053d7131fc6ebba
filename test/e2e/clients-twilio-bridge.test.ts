// The telephony bridge example (docs/examples/twilio-bridge) as a process, installed beside nsm-client, between a
// fake Twilio (a WebSocket client speaking Media Streams' messages: connected, start, base64 μ-law media every 20 ms
// in real time, mark, dtmf, stop) and a fake voice agent (a WebSocket server), with the real server denoising.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { mulaw } from 'alawmulaw';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config';
import { BRIDGE, buildTsClient, installDir, startServer, startWsStandIn, type ServerProcess } from '../helpers/clients-helpers';
import { eventually, fixture } from '../helpers/service-helpers';
import { StreamClient } from '../helpers/streaming-helpers';

const STREAM_SID = 'MZ00000000000000000000000000000001';

let server: ServerProcess;
let dir: string;
let token: string;
let ulaw: Buffer; // the caller's audio as Twilio sends it: 8 kHz μ-law
let denoised: Buffer; // what the agent must get: the service's μ-law stream of it (set by the first test)

interface Agent {
  url: string;
  messages: Array<Record<string, any>>;
  /** The messages of each connection, in the order they opened, and how many have closed. */
  connections: Array<Array<Record<string, any>>>;
  closes: () => number;
  closed: Promise<void>;
  close(): Promise<void>;
}

/** The fake agent: records every message; when the call starts it sends a mark and 20 ms of audio back. */
async function startAgent(): Promise<Agent> {
  const messages: Array<Record<string, any>> = [];
  const connections: Array<Array<Record<string, any>>> = [];
  let closes = 0;
  let closedResolve!: () => void;
  const closed = new Promise<void>((r) => (closedResolve = r));
  const server = await startWsStandIn((ws) => {
    const own: Array<Record<string, any>> = [];
    connections.push(own);
    ws.on('close', () => closes++);
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data));
      messages.push(msg);
      own.push(msg);
      if (msg.event === 'start') {
        ws.send(JSON.stringify({ event: 'media', streamSid: msg.start.streamSid, media: { payload: Buffer.alloc(160, 0xff).toString('base64') } }));
        ws.send(JSON.stringify({ event: 'mark', streamSid: msg.start.streamSid, mark: { name: 'agent-said-hello' } }));
      }
    });
    ws.on('close', () => closedResolve());
  });
  return { url: `${server.url.replace('http', 'ws')}/agent`, messages, connections, closes: () => closes, closed, close: server.close };
}

async function startBridge(env: Record<string, string>): Promise<{ url: string; child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, [path.join(dir, 'server.mjs')], { cwd: dir, env: { ...process.env, PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await eventually(() => /listening on (\S+)/.test(output) || child.exitCode !== null, 30_000).catch(() => undefined);
  const m = /listening on (\S+)/.exec(output);
  if (!m) throw new Error(`bridge did not start:\n${output}`);
  return { url: m[1], child, output: () => output };
}

/** The fake Twilio: one call of `audio` (μ-law), 20 ms a message (paced when `realtime`), a mark after chunk 50 and
 * a dtmf after chunk 80, then stop. Resolves with what the bridge sent back (the agent's messages). */
async function call(bridgeUrl: string, audio: Buffer, realtime: boolean): Promise<Array<Record<string, any>>> {
  const ws = new WebSocket(bridgeUrl);
  const received: Array<Record<string, any>> = [];
  ws.on('message', (data) => received.push(JSON.parse(String(data))));
  await new Promise((r, j) => ws.once('open', r).once('error', j));
  let seq = 1;
  const send = (msg: Record<string, unknown>): void => ws.send(JSON.stringify(msg));
  send({ event: 'connected', protocol: 'Call', version: '1.0.0' });
  send({
    event: 'start', sequenceNumber: String(seq++), streamSid: STREAM_SID,
    start: { accountSid: 'AC0000', streamSid: STREAM_SID, callSid: 'CA0000', tracks: ['inbound'], customParameters: { caller: 'test' }, mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 } },
  });
  const t0 = Date.now();
  const chunks = Math.ceil(audio.length / 160);
  for (let i = 0; i < chunks; i++) {
    if (realtime) {
      const wait = t0 + i * 20 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    send({ event: 'media', sequenceNumber: String(seq++), streamSid: STREAM_SID, media: { track: 'inbound', chunk: String(i + 1), timestamp: String(i * 20), payload: audio.subarray(i * 160, (i + 1) * 160).toString('base64') } });
    if (i === 49) send({ event: 'mark', sequenceNumber: String(seq++), streamSid: STREAM_SID, mark: { name: 'after-chunk-50' } });
    if (i === 79) send({ event: 'dtmf', sequenceNumber: String(seq++), streamSid: STREAM_SID, dtmf: { track: 'inbound_track', digit: '5' } });
  }
  send({ event: 'stop', sequenceNumber: String(seq++), streamSid: STREAM_SID, stop: { accountSid: 'AC0000', callSid: 'CA0000' } });
  await new Promise((r) => setTimeout(r, 200));
  ws.close();
  return received;
}

/** What the agent got, as [event, media bytes before it] and the audio itself. */
function agentView(messages: Array<Record<string, any>>): { order: Array<[string, number]>; audio: Buffer; seqs: number[]; stamps: number[] } {
  let bytes = 0;
  const order: Array<[string, number]> = [];
  const audio: Buffer[] = [];
  const stamps: number[] = [];
  for (const m of messages) {
    if (m.event === 'media') {
      const b = Buffer.from(m.media.payload, 'base64');
      stamps.push(Number(m.media.timestamp));
      expect(Number(m.media.timestamp)).toBe(bytes / 8);
      audio.push(b);
      bytes += b.length;
      continue;
    }
    order.push([m.event, bytes]);
  }
  return { order, audio: Buffer.concat(audio), seqs: messages.filter((m) => m.event !== 'connected').map((m) => Number(m.sequenceNumber)), stamps };
}

beforeAll(async () => {
  [server] = await Promise.all([startServer(), buildTsClient()]);
  token = await server.token();
  dir = installDir('nsm-twilio-bridge-');
  for (const f of ['bridge.mjs', 'server.mjs', 'package.json']) fs.copyFileSync(path.join(BRIDGE, f), path.join(dir, f));
  // 3 s of real noisy speech at 8 kHz (ffmpeg resamples), as Twilio would send it: μ-law.
  const config = loadConfig();
  const pcm = spawnSync(config.ffmpegPath, ['-v', 'error', '-i', fixture('speech-noisy-16k-mono.wav'), '-ar', '8000', '-ac', '1', '-f', 's16le', '-'], { maxBuffer: 1 << 24 }).stdout;
  ulaw = Buffer.from(mulaw.encode(new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2)));
  expect(ulaw.length).toBe(24000);
}, 180_000);

afterAll(async () => {
  await server?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** The service's answer to `bytes` on a stream of `query`, straight from the server. */
async function direct(query: string, bytes: Buffer, chunk: number): Promise<Buffer> {
  const ref = new StreamClient(`${server.url.replace('http', 'ws')}/v1/noise-suppressor/stream?${query}`, { Authorization: `Bearer ${token}` });
  await ref.ready;
  ref.send(bytes, chunk);
  ref.end();
  await ref.closed;
  return ref.audio;
}

test('a call in real time (μ-law on the stream): denoised audio to the agent, marks, dtmf and stop in place, the agent heard back', async () => {
  const agent = await startAgent();
  const bridge = await startBridge({ NSM_URL: server.url, NSM_TOKEN: token, AGENT_URL: agent.url, NSM_MODEL: 'nsm-1' });
  try {
    const t0 = Date.now();
    const back = await call(bridge.url, ulaw, true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2900); // 150 messages of 20 ms, in real time
    await agent.closed; // the bridge closes the agent's socket after stop
    const view = agentView(agent.messages);
    // Everything in order: connected and start first; the mark after exactly 50 × 20 ms of audio, the dtmf after 80,
    // stop after all of it; all audio arrived (total output = total input).
    expect(view.order).toEqual([['connected', 0], ['start', 0], ['mark', 8000], ['dtmf', 12800], ['stop', 24000]]);
    expect(view.audio.length).toBe(ulaw.length);
    expect(view.seqs).toEqual(view.seqs.map((_, i) => i + 1));
    expect(agent.messages.find((m) => m.event === 'start')!.start.customParameters).toEqual({ caller: 'test' });
    expect(agent.messages.every((m) => m.event === 'connected' || m.streamSid === STREAM_SID)).toBe(true);
    expect(agent.messages.find((m) => m.event === 'mark')!.mark.name).toBe('after-chunk-50');
    // The audio is what the service's μ-law stream gives for the caller's audio, byte for byte; and that is its 16-bit
    // stream's answer for the decoded audio, encoded back to μ-law.
    const expected = await direct('model=nsm-1&sample_rate=8000&encoding=mulaw', ulaw, 160);
    expect(view.audio.equals(expected)).toBe(true);
    const decoded = mulaw.decode(new Uint8Array(ulaw));
    const refPcm = await direct('model=nsm-1&sample_rate=8000', Buffer.from(decoded.buffer, decoded.byteOffset, decoded.byteLength), 3200);
    expect(Buffer.from(mulaw.encode(new Int16Array(refPcm.buffer, refPcm.byteOffset, refPcm.length / 2))).equals(expected)).toBe(true);
    denoised = expected;
    expect(view.audio.equals(ulaw)).toBe(false); // and it is not the noisy input
    // What the agent sent went back to Twilio unchanged.
    expect(back.map((m) => m.event)).toEqual(['media', 'mark']);
    expect(back[1].mark.name).toBe('agent-said-hello');
    expect(bridge.output()).toMatch(/denoising with nsm-1 \(mulaw\)/); // the default
  } finally {
    bridge.child.kill('SIGTERM');
    await agent.close();
  }
});

test('NSM_STREAM_ENCODING=pcm_s16le (a server without μ-law streams): the bridge converts, and the agent gets the same bytes', async () => {
  expect(denoised).toBeDefined();
  const agent = await startAgent();
  const bridge = await startBridge({ NSM_URL: server.url, NSM_TOKEN: token, AGENT_URL: agent.url, NSM_MODEL: 'nsm-1', NSM_STREAM_ENCODING: 'pcm_s16le' });
  try {
    await call(bridge.url, ulaw, false);
    await agent.closed;
    const view = agentView(agent.messages);
    expect(view.order).toEqual([['connected', 0], ['start', 0], ['mark', 8000], ['dtmf', 12800], ['stop', 24000]]);
    expect(view.audio.equals(denoised)).toBe(true);
    expect(bridge.output()).toMatch(/denoising with nsm-1 \(pcm_s16le\)/);
  } finally {
    bridge.child.kill('SIGTERM');
    await agent.close();
  }
});

test('fail-open: when the service refuses the stream, the caller\'s audio goes to the agent untouched, in order', async () => {
  const agent = await startAgent();
  const bridge = await startBridge({ NSM_URL: server.url, NSM_TOKEN: 'mw_live_' + 'x'.repeat(32), AGENT_URL: agent.url });
  try {
    await call(bridge.url, ulaw, false);
    await agent.closed;
    const view = agentView(agent.messages);
    expect(view.order).toEqual([['connected', 0], ['start', 0], ['mark', 8000], ['dtmf', 12800], ['stop', 24000]]);
    expect(view.audio.equals(ulaw)).toBe(true);
    expect(bridge.output()).toMatch(/noise suppression unavailable \(invalid_token/);
  } finally {
    bridge.child.kill('SIGTERM');
    await agent.close();
  }
});

test('hostile clients on the bridge\'s port close their own call only (1008, 1009); the process and the next call are unharmed', async () => {
  expect(denoised).toBeDefined();
  const agent = await startAgent();
  const bridge = await startBridge({ NSM_URL: server.url, NSM_TOKEN: token, AGENT_URL: agent.url, NSM_MODEL: 'nsm-1' });
  const start = JSON.stringify({ event: 'start', streamSid: STREAM_SID, start: { streamSid: STREAM_SID } });
  const media = JSON.stringify({ event: 'media', media: { payload: ulaw.subarray(0, 160).toString('base64') } });
  const nested = (depth: number): string => `{"event":"mark","mark":${'['.repeat(depth)}${']'.repeat(depth)}}`;
  /** Sends `messages` on a new connection; the close code it ends with (1000: the bridge let it be, we closed). */
  async function hostile(messages: string[]): Promise<number> {
    const ws = new WebSocket(bridge.url);
    const code = new Promise<number>((resolve) => ws.once('close', (c) => resolve(c)));
    ws.on('error', () => undefined);
    await new Promise((r, j) => ws.once('open', r).once('error', j));
    for (const m of messages) if (ws.readyState === WebSocket.OPEN) ws.send(m);
    // Closed by the bridge, or after 300 ms still open: then we close it.
    const open = await Promise.race([code.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 300))]);
    if (open) ws.close(1000);
    return code;
  }
  try {
    expect(await hostile([media])).toBe(1008); // audio before start: the bridge has no stream to write it to
    expect(await hostile([JSON.stringify({ event: 'mark', mark: { name: 'x' } })])).toBe(1008);
    expect(await hostile([start, start])).toBe(1008);
    // Forwarded later from the stream's callbacks, where JSON.stringify's stack overflow used to escape.
    expect(await hostile([start, nested(30_000)])).toBe(1008);
    expect(await hostile([nested(200_000)])).toBe(1009); // over the 64 KiB a message may have
    // Not Twilio's and ignored, then a call with a broken media message and two stops: left open.
    expect(await hostile(['null', '[1]', '5', '{"event":7}', start, '{"event":"media","media":null}', '{"event":"stop"}', '{"event":"stop"}'])).toBe(1000);
    expect(bridge.child.exitCode).toBeNull();
    expect(bridge.output()).toMatch(/media before start/);
    expect(bridge.output()).toMatch(/a second start/);
    expect(bridge.output()).toMatch(/a mark message that cannot be forwarded/);
    expect(bridge.output()).not.toMatch(/Uncaught|TypeError|RangeError/);

    // The next call is denoised as ever, on its own agent connection.
    const before = agent.connections.length;
    await call(bridge.url, ulaw, false);
    await eventually(() => agent.closes() >= agent.connections.length, 20_000);
    expect(agent.connections.length).toBe(before + 1);
    expect(agentView(agent.connections[before]).audio.equals(denoised)).toBe(true);
  } finally {
    bridge.child.kill('SIGTERM');
    await agent.close();
  }
});
