// Bounded memory: a ~180 MB, 24-minute stereo WAV goes through denoiseFile in a child process whose peak RSS
// (VmHWM of /proc/self/status: the child's own high-water mark; getrusage's maxRSS would start at the RSS of the
// jest process that forked it, which Linux keeps across execve) must stay under 400 MB and stop growing once the run
// has warmed up.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/config';
import { spawnFfmpeg, waitForExit } from '../../src/audio/ffmpeg';
import { fixture, makeTmpDir } from '../helpers/audio-helpers';

const config = loadConfig();
const LONG_SECONDS = 24 * 60;
/** Growth of the peak after the first quarter that counts as a leak (see the test). */
const LEAK_LIMIT_MB = 90;

// Runs in the child: one engine, a short file first, then the long one, recording the peak RSS along the way.
const CHILD = `
const { loadConfig } = require(${JSON.stringify(path.resolve(__dirname, '../../src/config/index.js'))});
const { denoiseFile } = require(${JSON.stringify(path.resolve(__dirname, '../../src/pipeline/index.js'))});
const { createInferenceEngine } = require(${JSON.stringify(path.resolve(__dirname, '../../src/inference/runtime/engine.js'))});
const [shortIn, longIn, outDir] = process.argv.slice(1);
const peakRssKb = () => Number(/VmHWM:\\s+(\\d+)/.exec(require('fs').readFileSync('/proc/self/status', 'utf8'))[1]);
(async () => {
  const config = loadConfig();
  const engine = await createInferenceEngine({ ...config, workers: 1 });
  const opts = { model: 'nsm-1', attenuationLimitDb: 0, outputFormat: 'flac', keepInputSampleRate: true };
  await denoiseFile({ config, engine }, shortIn, outDir + '/short.flac', opts);
  const shortRssKb = peakRssKb();
  let quarterRssKb = 0;
  const onProgress = (done, total) => { if (!quarterRssKb && done >= total / 4) quarterRssKb = peakRssKb(); };
  const stats = await denoiseFile({ config, engine }, longIn, outDir + '/long.flac', { ...opts, onProgress });
  const longRssKb = peakRssKb();
  await engine.close();
  process.stdout.write(JSON.stringify({ shortRssKb, quarterRssKb, longRssKb, stats }));
})().catch((e) => { console.error(e); process.exit(1); });
`;

test('a 24-minute ~180 MB upload stays far under 400 MB peak RSS', async () => {
  const tmp = makeTmpDir('nsm-memory-');
  try {
    const longIn = path.join(tmp, 'long.wav');
    const gen = spawnFfmpeg(config.ffmpegPath, [
      '-loglevel', 'error', '-f', 'lavfi', '-i', `anoisesrc=color=pink:sample_rate=32000:amplitude=0.2:duration=${LONG_SECONDS}`,
      '-ac', '2', '-c:a', 'pcm_s16le', '-f', 'wav', '-y', longIn,
    ]);
    gen.stdin!.end();
    expect((await waitForExit(gen)).code).toBe(0);
    expect(fs.statSync(longIn).size).toBeGreaterThan(180e6);

    const { stdout } = await promisify(execFile)(process.execPath, ['-e', CHILD, fixture('speech-noisy-44k1-stereo.wav'), longIn, tmp], {
      maxBuffer: 1 << 20,
    });
    const { shortRssKb, quarterRssKb, longRssKb, stats } = JSON.parse(stdout) as {
      shortRssKb: number; quarterRssKb: number; longRssKb: number; stats: { duration_s: number; channels: number };
    };
    expect(stats.duration_s).toBeCloseTo(LONG_SECONDS, 1);
    expect(stats.channels).toBe(2);
    expect(shortRssKb).toBeGreaterThan(0);
    // The peak settles within the first minutes (worker and ONNX Runtime warm-up). Holding the decoded audio
    // would keep growing: the last three quarters alone are 18 min × 2 ch × 16 kHz × 4 B ≈ 132 MB. Both figures are
    // reported together, with the RSS after the short file and at a quarter, so that a failure says where the peak
    // came. The high-water mark itself moves with the timing of garbage collection (the chunks are 1.5 MB buffers
    // outside the heap), by as much on a short file as on a long one: on the 2-core machine, 2026-11-23, growths
    // after the first quarter of 10–46 MB for 12-minute files, then 18–53 MB (14 runs, two builds alike), which
    // is above the 50 MB limit that a 12-minute file's leak (66 MB) left room for. Twice the length doubles what a
    // leak adds and leaves that noise as it was, hence 24 minutes and a limit of 90 MB.
    expect(quarterRssKb).toBeGreaterThan(0);
    const peakMb = Math.round(longRssKb / 1024);
    const growthAfterFirstQuarterMb = Math.round((longRssKb - quarterRssKb) / 1024);
    if (peakMb >= 400 || growthAfterFirstQuarterMb >= LEAK_LIMIT_MB) {
      throw new Error(`peak RSS ${peakMb} MB (limit 400; ${Math.round(shortRssKb / 1024)} MB after the short file, ${Math.round(quarterRssKb / 1024)} MB at a quarter of the long one), growth after the first quarter ${growthAfterFirstQuarterMb} MB (limit ${LEAK_LIMIT_MB})`);
    }
    expect({ peakMb, growthAfterFirstQuarterMb, peakUnder400: peakMb < 400, growthUnderLimit: growthAfterFirstQuarterMb < LEAK_LIMIT_MB }).toMatchObject({
      peakUnder400: true,
      growthUnderLimit: true,
    });
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}, 180_000);
