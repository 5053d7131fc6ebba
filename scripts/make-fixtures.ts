// Regenerates the small test clips in fixtures/ (see fixtures/README.md). Deterministic: seeded noise,
// bit-exact encoder flags. Run: npx tsc -p tsconfig.json && node dist/scripts/make-fixtures.js [outDir]
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig, PROJECT_ROOT, type Config } from '../src/config';
import { readPcm, writePcm } from '../src/pipeline/clips';
import { mixAtSnr, noiseBed, normalizePeak, seededRandom, speechSourcePath } from '../src/audio/synthetic-noise';

/** Where the fixture clip starts in the utterance (speech runs from ~2.0 s to ~5.2 s) and how long it is. */
const CLIP_START_S = 1.7;
const CLIP_SECONDS = 3;
const SNR_DB = 5;

/** The seven formats the API accepts, each from the same 44.1 kHz stereo noisy clip. */
export const FORMAT_FIXTURES: { file: string; args: string[] }[] = [
  { file: 'speech-noisy-44k1-stereo.wav', args: ['-c:a', 'pcm_s16le', '-f', 'wav'] },
  { file: 'speech-noisy-44k1-stereo.flac', args: ['-c:a', 'flac', '-sample_fmt', 's16', '-f', 'flac'] },
  { file: 'speech-noisy-44k1-stereo.ogg', args: ['-c:a', 'libvorbis', '-q:a', '1', '-f', 'ogg'] },
  // Opus always runs at 48 kHz: ffmpeg decodes these two back at 48000 Hz, which is then "the input rate".
  { file: 'speech-noisy-44k1-stereo.opus', args: ['-c:a', 'libopus', '-b:a', '48k', '-f', 'opus'] },
  { file: 'speech-noisy-44k1-stereo.mp3', args: ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3'] },
  { file: 'speech-noisy-44k1-stereo.m4a', args: ['-c:a', 'aac', '-b:a', '64k', '-f', 'mp4'] },
  { file: 'speech-noisy-44k1-stereo.webm', args: ['-c:a', 'libopus', '-b:a', '48k', '-f', 'webm'] },
];

async function noisySpeech(config: Config, sampleRate: number, channels: number, seconds: number, seed: number): Promise<Float32Array[]> {
  const [speechAll] = await readPcm(config, speechSourcePath(), sampleRate, 1);
  const start = Math.round(CLIP_START_S * sampleRate);
  const speech = speechAll.slice(start, start + Math.round(seconds * sampleRate));
  const rand = seededRandom(seed);
  const out: Float32Array[] = [];
  for (let c = 0; c < channels; c++) {
    // Each channel: the same speech (slightly quieter to the right) over its own noise realisation.
    const gain = 1 - 0.15 * c;
    const voiced = speech.map((v) => v * gain);
    out.push(mixAtSnr(voiced, noiseBed(speech.length, sampleRate, rand), SNR_DB, 1));
  }
  return normalizePeak(out, 0.9);
}

export async function makeFixtures(config: Config, outDir: string): Promise<string[]> {
  await fs.promises.mkdir(outDir, { recursive: true });
  const written: string[] = [];
  const stereo = await noisySpeech(config, 44100, 2, CLIP_SECONDS, 1);
  for (const f of FORMAT_FIXTURES) {
    await writePcm(config, stereo, 44100, path.join(outDir, f.file), f.args);
    written.push(f.file);
  }
  const wav16 = ['-c:a', 'pcm_s16le', '-f', 'wav'];
  await writePcm(config, await noisySpeech(config, 16000, 1, CLIP_SECONDS, 2), 16000, path.join(outDir, 'speech-noisy-16k-mono.wav'), wav16);
  await writePcm(config, await noisySpeech(config, 48000, 1, 2.5, 3), 48000, path.join(outDir, 'speech-noisy-48k-mono.wav'), wav16);
  written.push('speech-noisy-16k-mono.wav', 'speech-noisy-48k-mono.wav');

  // Bad inputs: text under an audio name, zero bytes, and an MP4 cut before its index (moov) atom.
  await fs.promises.writeFile(path.join(outDir, 'not-audio.wav'), 'This is a text file pretending to be a WAV.\n'.repeat(20));
  await fs.promises.writeFile(path.join(outDir, 'empty.wav'), Buffer.alloc(0));
  const m4a = await fs.promises.readFile(path.join(outDir, 'speech-noisy-44k1-stereo.m4a'));
  await fs.promises.writeFile(path.join(outDir, 'truncated.m4a'), m4a.subarray(0, Math.floor(m4a.length / 2)));
  written.push('not-audio.wav', 'empty.wav', 'truncated.m4a');
  return written;
}

if (require.main === module) {
  const outDir = path.resolve(process.argv[2] ?? path.join(PROJECT_ROOT, 'fixtures'));
  makeFixtures(loadConfig(), outDir).then(
    (files) => {
      let total = 0;
      for (const f of files) {
        const size = fs.statSync(path.join(outDir, f)).size;
        total += size;
        console.log(`${f.padEnd(34)} ${String(size).padStart(8)} bytes`);
      }
      console.log(`total ${(total / 1024).toFixed(0)} KiB in ${outDir}`);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
