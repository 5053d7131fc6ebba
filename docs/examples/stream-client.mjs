#!/usr/bin/env node
// A small client of the live stream (GET /v1/noise-suppressor/stream over a WebSocket, docs/streaming.md) in plain
// JavaScript with the `ws` package: reads a 16-bit PCM WAV, sends it in 20 ms frames at real-time pace (as a
// microphone would), writes the denoised audio to a WAV and prints the latency the server added.
//
//   npm install ws                               # already installed in this project
//   export NSM_TOKEN=mw_live_...                 # a key with the noise-suppressor:stream scope
//   node docs/examples/stream-client.mjs noisy.wav denoised.wav [--url http://127.0.0.1:8080] [--model nsm-2]
//
// Other formats: convert first, e.g. `ffmpeg -i in.mp3 -ac 1 -ar 16000 -c:a pcm_s16le noisy.wav`. Browsers cannot set
// the Authorization header on a WebSocket: they get a single-use ?ticket= from POST /v1/noise-suppressor/stream/tickets.
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';

const { values: opt, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: 'string', default: process.env.NSM_URL ?? 'http://localhost:8080' },
    model: { type: 'string', default: 'nsm-2' },
    token: { type: 'string', default: process.env.NSM_TOKEN },
  },
});
const [input, output] = positionals;
if (!input || !output || !opt.token) {
  console.error('usage: NSM_TOKEN=... node stream-client.mjs IN.wav OUT.wav [--url URL] [--model nsm-2]');
  process.exit(2);
}

/** The format and PCM of a 16-bit PCM WAV (mono or stereo). */
function readWav(buf) {
  let fmt = null;
  for (let off = 12; off + 8 <= buf.length; ) {
    const id = buf.toString('ascii', off, off + 4);
    const size = buf.readUInt32LE(off + 4);
    if (id === 'fmt ') fmt = { format: buf.readUInt16LE(off + 8), channels: buf.readUInt16LE(off + 10), rate: buf.readUInt32LE(off + 12), bits: buf.readUInt16LE(off + 22) };
    if (id === 'data' && fmt) {
      if (fmt.format !== 1 || fmt.bits !== 16 || fmt.channels > 2) throw new Error('need a 16-bit PCM WAV, mono or stereo (convert it with ffmpeg)');
      return { ...fmt, pcm: buf.subarray(off + 8, off + 8 + size) };
    }
    off += 8 + size + (size % 2);
  }
  throw new Error(`${input} is not a WAV file`);
}

function wavHeader(bytes, rate, channels) {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + bytes, 4);
  h.write('WAVEfmt ', 8);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * channels * 2, 28);
  h.writeUInt16LE(channels * 2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(bytes, 40);
  return h;
}

let wav;
try {
  wav = readWav(fs.readFileSync(input));
} catch (err) {
  console.error(err.message);
  process.exit(2);
}
const frameBytes = Math.round(wav.rate * 0.02) * wav.channels * 2; // 20 ms
const query = new URLSearchParams({ model: opt.model, sample_rate: String(wav.rate), channels: String(wav.channels), encoding: 'pcm_s16le' });
const url = `${opt.url.replace(/^http/, 'ws')}/v1/noise-suppressor/stream?${query}`;
const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${opt.token}` } });

const received = [];
let receivedBytes = 0;
let delaySamples = 0;
const sentAt = []; // when each frame left, by frame index
const latencies = []; // per output message: ms the server added (see 'message')

// A refusal (bad key, scope, plan, too many streams, bad query) is an ordinary HTTP answer with the error envelope.
ws.on('unexpected-response', (_req, res) => {
  let body = '';
  res.on('data', (c) => (body += c));
  res.on('end', () => {
    console.error(`refused: HTTP ${res.statusCode} ${body}`);
    process.exit(1);
  });
});
ws.on('error', (err) => {
  console.error(`connection failed: ${err.message}`);
  process.exit(1);
});

ws.on('message', (data, isBinary) => {
  if (isBinary) {
    // Output sample n is input sample n denoised; the server may hold it back by the model's declared delay. What it
    // added beyond that: the time since the frame holding input n + delay was sent (for the message's first sample,
    // which waited longest; 0 when that frame is not even sent yet).
    const first = receivedBytes / (wav.channels * 2);
    const frame = Math.floor(((first + delaySamples) * wav.channels * 2) / frameBytes);
    latencies.push(sentAt[frame] === undefined ? 0 : performance.now() - sentAt[frame]);
    received.push(data);
    receivedBytes += data.length;
    return;
  }
  const msg = JSON.parse(String(data));
  if (msg.type === 'ready') {
    delaySamples = msg.latency_samples;
    console.log(`ready: ${msg.request_id}, ${msg.model} at ${msg.sample_rate} Hz, model delay ${msg.latency_ms} ms`);
    sendFrames();
  } else if (msg.type === 'done') {
    console.log(`done: ${JSON.stringify(msg.stats)}`);
  } else if (msg.type === 'error') {
    console.error(`error: ${msg.error.type}: ${msg.error.message}`);
  }
});

/** 20 ms frames at real-time pace (each on its own deadline, so timer lateness does not add up), then "end". */
function sendFrames() {
  const start = performance.now();
  let i = 0;
  const next = () => {
    while (i * frameBytes < wav.pcm.length && performance.now() >= start + i * 20) {
      sentAt[i] = performance.now();
      ws.send(wav.pcm.subarray(i * frameBytes, (i + 1) * frameBytes));
      i++;
    }
    if (i * frameBytes < wav.pcm.length) setTimeout(next, Math.max(0, start + i * 20 - performance.now()));
    else ws.send(JSON.stringify({ type: 'end' }));
  };
  next();
}

ws.on('close', (code, reason) => {
  const pcm = Buffer.concat(received);
  fs.writeFileSync(output, Buffer.concat([wavHeader(pcm.length, wav.rate, wav.channels), pcm]));
  const sorted = latencies.sort((a, b) => a - b);
  const p = (q) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))].toFixed(1) : '-');
  console.log(`wrote ${output}: ${(pcm.length / (wav.rate * wav.channels * 2)).toFixed(2)} s`);
  console.log(`server-added latency (network + server, on top of the model delay): p50 ${p(0.5)} ms, p95 ${p(0.95)} ms, max ${p(1)} ms`);
  if (code !== 1000) {
    console.error(`closed with ${code} ${reason}`);
    process.exit(1);
  }
});
