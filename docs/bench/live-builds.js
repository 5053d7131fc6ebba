// Two builds' live workers side by side, in one process: the tick loop of each build's LiveHost (as
// docs/bench/live-encodings.js runs it: N nsm-2 pcm_s16le streams, 20 ms chunks of a real recording, a tenth of the
// streams per tick), the builds in alternating order round after round, CPU time of this process (ONNX Runtime's
// threads included) per stream-second. Behind docs/streaming.md, "8 kHz". A build is a checkout's root after
// `npm run build` (e.g. an older commit unpacked with `git archive COMMIT | tar -x -C DIR`, node_modules linked, models
// copied). Run from this repository's root:
//
//   node docs/bench/live-builds.js BEFORE_ROOT AFTER_ROOT [STREAMS=100] [SECONDS=4] [ROUNDS=6] [RATE=8000]
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const [BEFORE, AFTER] = process.argv.slice(2, 4).map((p) => path.resolve(p));
const [STREAMS = 100, SECONDS = 4, ROUNDS = 6, RATE = 8000] = process.argv.slice(4, 8).map(Number);
const GROUPS = 10;

/** A build's LiveHost (live/host.js now, live-host.js before the live folder) and its graphs. */
function build(root) {
  const dist = path.join(root, 'dist/src');
  const hostFile = ['inference/live/host.js', 'inference/live-host.js'].map((f) => path.join(dist, f)).find((f) => fs.existsSync(f));
  const { loadConfig } = require(path.join(dist, 'config'));
  return {
    LiveHost: require(hostFile).LiveHost,
    loadGraphs: require(['inference/runtime/sessions.js', 'inference/sessions.js'].map((f) => path.join(dist, f)).find((f) => fs.existsSync(f))).loadGraphs,
    config: loadConfig(),
  };
}

async function main() {
  if (!BEFORE || !AFTER) throw new Error('usage: node docs/bench/live-builds.js BEFORE_ROOT AFTER_ROOT [STREAMS] [SECONDS] [ROUNDS] [RATE]');
  const builds = { before: build(BEFORE), after: build(AFTER) };
  const speech = path.resolve('../shared/eval/dns3-real/ms_realrec_english_headset_A1XUZFDVKP95VC_Water_Running__far_fileid_7.wav');
  const bytes = execFileSync(builds.after.config.ffmpegPath, ['-v', 'error', '-i', speech, '-ac', '1', '-ar', String(RATE), '-f', 's16le', '-'], { maxBuffer: 1 << 26 });
  for (const b of Object.values(builds)) b.graphs = await b.loadGraphs(b.config.modelsDir);
  let nextId = 1;

  async function run(b, seconds) {
    const host = new b.LiveHost(b.graphs);
    const chunk = (RATE / 50) * 2;
    const chunks = Math.floor(bytes.length / chunk);
    const ids = [];
    for (let i = 0; i < STREAMS; i++) {
      const streamId = nextId++;
      host.open({ streamId, model: 'nsm-2', channels: 1, sampleRate: RATE, encoding: 'pcm_s16le', attenuationLimitDb: 0 });
      ids.push(streamId);
    }
    const sent = new Array(STREAMS).fill(0);
    const tick = async (t) => {
      const items = [];
      for (let i = t % GROUPS; i < STREAMS; i += GROUPS) {
        const k = (sent[i]++ + i * 37) % chunks;
        items.push({ streamId: ids[i], bytes: bytes.subarray(k * chunk, (k + 1) * chunk), end: false });
      }
      for (const o of await host.tick(items)) if (o.error) throw new Error(o.error);
    };
    for (let t = 0; t < GROUPS * 25; t++) await tick(t); // warm-up: half a second of every stream
    sent.fill(0);
    const t0 = process.cpuUsage();
    for (let t = 0; t < GROUPS * seconds * 50; t++) await tick(t);
    const used = process.cpuUsage(t0);
    for (const id of ids) host.abort(id);
    return (used.user + used.system) / 1000 / (STREAMS * seconds);
  }

  for (const b of Object.values(builds)) await run(b, 1); // untimed: JIT and first allocations
  console.log(`live tick loop: ${STREAMS} nsm-2 pcm_s16le streams at ${RATE} Hz, ${SECONDS} s per run; CPU ms per stream-second`);
  const ratios = [];
  for (let r = 0; r < ROUNDS; r++) {
    const got = {};
    for (const name of r % 2 === 0 ? ['before', 'after'] : ['after', 'before']) got[name] = await run(builds[name], SECONDS);
    ratios.push(got.after / got.before);
    console.log(`round ${r + 1}: before ${got.before.toFixed(3)}, after ${got.after.toFixed(3)}; after / before ${(got.after / got.before).toFixed(3)}`);
  }
  const mean = ratios.reduce((a, b) => a + b, 0) / ratios.length;
  const sd = Math.sqrt(ratios.reduce((a, b) => a + (b - mean) ** 2, 0) / (ratios.length - 1));
  console.log(`after / before: mean ${mean.toFixed(3)}, sd ${sd.toFixed(3)} over ${ratios.length} rounds`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
