// Driver of test/e2e/clients-typescript.test.ts: live streams with nsm-client against the real server (PCM of a 16 kHz
// mono WAV): paced with events, a Node Duplex, a Web TransformStream, a WHATWG WebSocket with a ticket (run with
// --experimental-websocket on Node 20), a refused option, a mid-stream error, and, against FAKE_URL (a stand-in
// that speaks protocol messages the server does not send yet), unknown messages surfaced as events.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { NsmClient } from 'nsm-client';

const { URL: BASE, TOKEN, PCM_FILE, FAKE_URL } = process.env;
const pcm = fs.readFileSync(PCM_FILE);
const sha = (b) => createHash('sha256').update(b).digest('hex');
const client = new NsmClient(BASE, TOKEN);
const report = {};
const caught = async (p) => {
  try {
    await p;
    return null;
  } catch (e) {
    return { class: e.constructor.name, type: e.type, status: e.status, closeCode: e.closeCode, request_id: e.request_id, message: e.message };
  }
};

// 1. Paced (20 ms frames in real time), output through 'audio' events, every message as an event.
{
  const s = client.streams.open({ model: 'nsm-1', sample_rate: 16000 }, { pace: true });
  const events = [];
  const chunks = [];
  s.on('message', (m) => events.push(m.type));
  s.on('ready', (m) => events.push(`event:ready:${m.latency_ms}`));
  s.on('done', () => events.push('event:done'));
  s.on('audio', (b) => chunks.push(Buffer.from(b)));
  const ready = await s.ready;
  const t0 = performance.now();
  // written in odd sizes: the client keeps whole samples per message and its own 20 ms frames
  for (let off = 0; off < pcm.length; off += 3333) await s.write(pcm.subarray(off, off + 3333));
  const done = await s.end();
  const out = Buffer.concat(chunks);
  report.paced = { ready: { model: ready.model, latency_ms: ready.latency_ms }, elapsedMs: Math.round(performance.now() - t0), audioS: pcm.length / 32000, events, done: done.stats, outBytes: out.length, sha: sha(out), closeCode: await new Promise((r) => (s.closeCode !== null ? r(s.closeCode) : s.on('close', (c) => r(c.code)))) };
}

// 2. Node Duplex in a pipeline, as fast as the server takes it.
{
  const s = client.streams.open({ model: 'nsm-1', sample_rate: 16000 });
  const out = [];
  await pipeline(
    Readable.from((function* () { for (let off = 0; off < pcm.length; off += 1001) yield pcm.subarray(off, off + 1001); })()),
    s.duplex(),
    new Writable({ write(c, _e, cb) { out.push(c); cb(); } }),
  );
  const b = Buffer.concat(out);
  report.duplex = { outBytes: b.length, sha: sha(b), done: (await s.done).stats.output_seconds };
}

// 3. Web TransformStream.
{
  const s = client.streams.open({ model: 'nsm-1', sample_rate: 16000 });
  const source = new ReadableStream({ start(c) { for (let off = 0; off < pcm.length; off += 4096) c.enqueue(new Uint8Array(pcm.subarray(off, off + 4096))); c.close(); } });
  const out = [];
  for await (const chunk of source.pipeThrough(s.transform())) out.push(Buffer.from(chunk));
  const b = Buffer.concat(out);
  report.transform = { outBytes: b.length, sha: sha(b) };
}

// 4. A WHATWG WebSocket (Node's global one here; a browser's alike): the key cannot go in headers, so a ticket.
if (globalThis.WebSocket) {
  const browserLike = new NsmClient(BASE, TOKEN, { WebSocket: globalThis.WebSocket });
  const s = browserLike.streams.open({ model: 'nsm-1', sample_rate: 16000 });
  const out = [];
  s.on('audio', (b) => out.push(Buffer.from(b)));
  await s.write(pcm);
  const done = await s.end();
  const b = Buffer.concat(out);
  report.whatwg = { outBytes: b.length, sha: sha(b), done: done.stats.output_seconds };
  // A browser without a key: its backend hands it a ticket.
  const { ticket } = await client.streams.ticket();
  const keyless = new NsmClient({ baseUrl: BASE, WebSocket: globalThis.WebSocket });
  const t = keyless.streams.open({ model: 'nsm-1', ticket });
  report.whatwgTicket = { ready: (await t.ready).type };
  t.close();
}

// 5. Options are forwarded as they are: an option this server does not know (`turbo`) is refused by name (400 before the upgrade).
report.unknownOption = await caught(client.streams.open({ model: 'nsm-1', turbo: true }).ready);

// 6. A fault mid-stream: a text message the protocol does not have → error message, close 1007.
{
  const s = client.streams.open({ model: 'nsm-1' });
  const errorEvents = [];
  s.on('error', (e) => errorEvents.push(e.type));
  await s.ready;
  s.sendText('{"type":"bogus"}');
  report.midStream = { error: await caught(s.done), errorEvents };
}

// 7. Unknown server messages (speech_start/speech_end being added) and extra query options, against the stand-in.
if (FAKE_URL) {
  const fake = new NsmClient(FAKE_URL, TOKEN);
  const s = fake.streams.open({ model: 'nsm-2', encoding: 'mulaw', vad: true, echo_reference: 'last', sample_rate: 8000 });
  const seen = [];
  s.on('speech_start', (m) => seen.push(['speech_start', m.at_ms]));
  s.on('speech_end', (m) => seen.push(['speech_end', m.at_ms]));
  s.on('message', (m) => seen.push(['message', m.type]));
  let echoed = 0;
  s.on('audio', (b) => (echoed += b.length));
  await s.ready;
  await s.write(new Uint8Array(800)); // μ-law: 1 byte a sample
  const done = await s.end();
  report.fake = { seen, echoed, query: done.query };
}
console.log(JSON.stringify(report));
