// Side-by-side measurement behind docs/streaming.md, "G.711": the live worker's tick loop alone (src/inference/
// live/host.ts, the graphs batched as in the server), N nsm-2 streams at 8 kHz, each sending 20 ms chunks of a real
// recording, a tenth of the streams per tick (as ticks every 2 ms carry them), as fast as the loop runs. CPU time of
// this process (ONNX Runtime's threads included) per stream-second of audio, for pcm_s16le, mulaw and alaw in
// alternating order, round after round; the ratios to pcm_s16le are per round. No server, no WebSocket: what differs
// between the encodings is only the worker's decoding and encoding. Run from the repository root after a build:
//
//   node docs/bench/live-encodings.js [STREAMS=100] [SECONDS=8] [ROUNDS=4] [RATE=8000]
//   node docs/bench/live-encodings.js 100 4 3 8000,16000     pcm_s16le at each rate instead, alternating
'use strict';
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { loadConfig } = require(path.resolve('dist/src/config'));
const { loadGraphs } = require(path.resolve('dist/src/inference/runtime/sessions'));
const { LiveHost } = require(path.resolve('dist/src/inference/live/host'));

const [STREAMS = 100, SECONDS = 8, ROUNDS = 4] = process.argv.slice(2, 5).map(Number);
const RATES = (process.argv[5] ?? '8000').split(',').map(Number);
const ENCODINGS = ['pcm_s16le', 'mulaw', 'alaw'];
const FORMAT = { pcm_s16le: 's16le', mulaw: 'mulaw', alaw: 'alaw' };
const BYTES = { pcm_s16le: 2, mulaw: 1, alaw: 1 };
const GROUPS = 10;

async function main() {
  const config = loadConfig();
  const speech = path.resolve('../shared/eval/dns3-real/ms_realrec_english_headset_A1XUZFDVKP95VC_Water_Running__far_fileid_7.wav');
  const load = (rate, e) => execFileSync(config.ffmpegPath, ['-v', 'error', '-i', speech, '-ac', '1', '-ar', String(rate), '-f', FORMAT[e], '-'], { maxBuffer: 1 << 26 });
  const graphs = await loadGraphs(config.modelsDir);
  let nextId = 1;

  async function run(encoding, rate, seconds = SECONDS) {
    const host = new LiveHost(graphs);
    const bytes = load(rate, encoding);
    const frame = rate / 50;
    const chunk = frame * BYTES[encoding];
    const chunks = Math.floor(bytes.length / chunk);
    const ids = [];
    for (let i = 0; i < STREAMS; i++) {
      const streamId = nextId++;
      host.open({ streamId, model: 'nsm-2', channels: 1, sampleRate: rate, encoding, attenuationLimitDb: 0 });
      ids.push(streamId);
    }
    const frames = seconds * 50;
    const sent = new Array(STREAMS).fill(0);
    const tick = async (t) => {
      const items = [];
      for (let i = t % GROUPS; i < STREAMS; i += GROUPS) {
        const k = (sent[i]++ + i * 37) % chunks; // streams at different places in the recording
        items.push({ streamId: ids[i], bytes: bytes.subarray(k * chunk, (k + 1) * chunk), end: false });
      }
      const out = await host.tick(items);
      for (const o of out) if (o.error) throw new Error(o.error);
    };
    for (let t = 0; t < GROUPS * 25; t++) await tick(t); // warm-up: half a second of every stream
    sent.fill(0);
    const t0 = process.cpuUsage();
    const w0 = performance.now();
    for (let t = 0; t < GROUPS * frames; t++) await tick(t);
    const used = process.cpuUsage(t0);
    const wall = performance.now() - w0;
    for (const id of ids) host.abort(id);
    return { cpu: (used.user + used.system) / 1000 / (STREAMS * seconds), wall: wall / (STREAMS * seconds) };
  }

  // Untimed: the first runs of a process pay for the JIT and ONNX Runtime's first allocations.
  for (const rate of RATES) for (const e of RATES.length > 1 ? ['pcm_s16le'] : ENCODINGS) await run(e, rate, 1);
  if (RATES.length > 1) {
    console.log(`live tick loop: ${STREAMS} nsm-2 pcm_s16le streams at ${RATES.join(' and ')} Hz, ${SECONDS} s each, ${ROUNDS} rounds; CPU ms per stream-second`);
    for (let r = 0; r < ROUNDS; r++) {
      const got = {};
      for (const rate of r % 2 === 0 ? RATES : [...RATES].reverse()) got[rate] = (await run('pcm_s16le', rate)).cpu;
      console.log(`round ${r + 1}: ` + RATES.map((rate) => `${rate} Hz ${got[rate].toFixed(3)}`).join(', ') + `; ${RATES[0]} / ${RATES[1]} ${(got[RATES[0]] / got[RATES[1]]).toFixed(3)}`);
    }
    return;
  }
  const RATE = RATES[0];
  console.log(`live tick loop: ${STREAMS} nsm-2 streams at ${RATE} Hz, ${SECONDS} s each, ${ROUNDS} rounds; CPU ms per stream-second (wall ms per stream-second)`);
  const ratios = { mulaw: [], alaw: [] };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? ENCODINGS : [...ENCODINGS].reverse();
    const got = {};
    for (const e of order) got[e] = await run(e, RATE);
    for (const e of ['mulaw', 'alaw']) ratios[e].push(got[e].cpu / got.pcm_s16le.cpu);
    console.log(`round ${r + 1} (${order.join(', ')}): ` + ENCODINGS.map((e) => `${e} ${got[e].cpu.toFixed(3)} (${got[e].wall.toFixed(3)})`).join(', ') +
      `; mulaw / pcm ${ratios.mulaw[r].toFixed(3)}, alaw / pcm ${ratios.alaw[r].toFixed(3)}`);
  }
  for (const e of ['mulaw', 'alaw']) {
    const xs = ratios[e];
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, xs.length - 1));
    // 95 % interval of the mean ratio (t with n - 1 degrees of freedom; n small).
    const t = [12.71, 4.3, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26][Math.min(8, xs.length - 2)] ?? 2;
    const half = xs.length > 1 ? (t * sd) / Math.sqrt(xs.length) : NaN;
    console.log(`${e} / pcm_s16le CPU per stream-second: mean ${mean.toFixed(3)}, 95 % CI ${(mean - half).toFixed(3)}–${(mean + half).toFixed(3)}, range ${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)}`);
  }
}

main().then(() => process.exit(0), (err) => {
  console.error(err);
  process.exit(1);
});
