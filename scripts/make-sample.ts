// Writes models/sample.wav, the clip served by GET /v1/noise-suppressor/sample: ~4.5 s of 16 kHz mono
// LibriSpeech speech mixed with deterministic pink noise + mains hum at 5 dB SNR (16-bit PCM WAV).
// Run during the build: node dist/scripts/make-sample.js [outPath]
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig, type Config } from '../src/config';
import { readPcm, writePcm } from '../src/pipeline/clips';
import { mixAtSnr, noiseBed, seededRandom, speechSourcePath } from '../src/audio/synthetic-noise';

export const SAMPLE_RATE = 16000;
/** Speech in the utterance runs ~2.0–5.2 s; start a little before it and leave ~0.8 s of noise-only tail. */
const START_S = 1.5;
const SECONDS = 4.5;
const SNR_DB = 5;
const SEED = 20240501;

export async function makeSample(config: Config, outPath: string = path.join(config.modelsDir, 'sample.wav')): Promise<string> {
  const [speechAll] = await readPcm(config, speechSourcePath(), SAMPLE_RATE, 1);
  const start = Math.round(START_S * SAMPLE_RATE);
  const speech = speechAll.slice(start, start + Math.round(SECONDS * SAMPLE_RATE));
  const noisy = mixAtSnr(speech, noiseBed(speech.length, SAMPLE_RATE, seededRandom(SEED)), SNR_DB, 0.9);
  await fs.promises.mkdir(path.dirname(outPath), { recursive: true });
  // Write next to the target then rename, so a server reading the file never sees half of it.
  const tmp = `${outPath}.tmp-${process.pid}`;
  await writePcm(config, [noisy], SAMPLE_RATE, tmp, ['-c:a', 'pcm_s16le', '-f', 'wav']);
  await fs.promises.rename(tmp, outPath);
  return outPath;
}

if (require.main === module) {
  const config = loadConfig();
  makeSample(config, process.argv[2] ? path.resolve(process.argv[2]) : undefined).then(
    (p) => console.log(`wrote ${p} (${fs.statSync(p).size} bytes)`),
    (err) => {
      console.error(`make-sample failed: ${(err as Error).message}`);
      process.exit(1);
    },
  );
}
