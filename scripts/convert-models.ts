// Converts the two DTLN TFLite networks shipped in @vonage/noise-suppression into ONNX sequence graphs, and Silero VAD
// (scripts/vad/silero.ts) into one, and writes models/manifest.json. Run by `npm run models` (and by the install's prepare step).
//   node dist/scripts/convert-models.js [--out DIR]
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../src/config';
import { manifestFields, STAGE1_FILE, STAGE2_FILE } from '../src/inference/models/specs';
import { MODEL_IDS, type ModelManifestEntry } from '../src/inference/types';
import { extractStage1, extractStage2, LstmWeights } from './dtln/extract';
import { buildStage1, buildStage2 } from './dtln/onnx-graphs';
import { parseTflite, TfliteGraph } from './tflite/reader';
import { convertSilero, SHIPPED_SILERO } from './vad/silero';
import { VAD_FILE } from '../src/vad/silero-graph';

export { STAGE1_FILE, STAGE2_FILE };

/** Location of the TFLite networks inside the pinned npm package. */
export function tflitePaths(): { stage1: string; stage2: string } {
  const pkg = path.dirname(require.resolve('@vonage/noise-suppression/package.json'));
  return { stage1: path.join(pkg, 'dist', 'model_1.tflite'), stage2: path.join(pkg, 'dist', 'model_2.tflite') };
}

export function loadTflite(file: string): TfliteGraph {
  return parseTflite(new Uint8Array(fs.readFileSync(file)));
}

/** The ONNX graphs keep the TFLite state layout: index k of h0/c0 is LSTM k, which must be TFLite layer k. */
function checkStateLayout(lstms: LstmWeights[]): void {
  lstms.forEach((l, k) => {
    if (l.stateLayer !== k || l.hSlot !== 0 || l.cSlot !== 1) {
      throw new Error(`LSTM ${k} uses state [layer ${l.stateLayer}, h ${l.hSlot}, c ${l.cSlot}]; expected [${k}, 0, 1]`);
    }
  });
}

export function convertStage1(graph: TfliteGraph): Uint8Array {
  const layers = extractStage1(graph);
  checkStateLayout(layers.lstms);
  return buildStage1(layers);
}

export function convertStage2(graph: TfliteGraph): Uint8Array {
  const layers = extractStage2(graph);
  checkStateLayout(layers.lstms);
  return buildStage2(layers);
}

export interface Manifest {
  format: 1;
  source: { package: string; version: string; files: string[] };
  default: 'nsm-2';
  graphs: Array<{ file: string; sha256: string; bytes: number }>;
  models: ModelManifestEntry[];
  /** The voice-activity graph (speech_segments, trim_silence) and where it comes from. */
  vad: { file: string; model: string; source: { package: string; version: string; file: string } };
}

function sha256(...parts: Uint8Array[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('hex');
}

export function convertAll(outDir: string): Manifest {
  const src = tflitePaths();
  fs.mkdirSync(outDir, { recursive: true });
  const vad = convertSilero(SHIPPED_SILERO);
  const converted = [
    { file: STAGE1_FILE, bytes: convertStage1(loadTflite(src.stage1)) },
    { file: STAGE2_FILE, bytes: convertStage2(loadTflite(src.stage2)) },
    { file: VAD_FILE, bytes: vad.bytes },
  ];
  for (const { file, bytes } of converted) {
    // Write atomically so a running server never loads a half-written graph.
    const tmp = path.join(outDir, `.${file}.tmp`);
    fs.writeFileSync(tmp, bytes);
    fs.renameSync(tmp, path.join(outDir, file));
  }
  const graphs = converted.map(({ file, bytes }) => ({ file, sha256: sha256(bytes), bytes: bytes.length }));
  const content = new Map(converted.map((c) => [c.file, c.bytes]));
  const pkgJson = JSON.parse(fs.readFileSync(require.resolve('@vonage/noise-suppression/package.json'), 'utf8')) as { version: string };
  const manifest: Manifest = {
    format: 1,
    source: { package: '@vonage/noise-suppression', version: pkgJson.version, files: ['dist/model_1.tflite', 'dist/model_2.tflite'] },
    default: 'nsm-2',
    graphs,
    // What each public model id runs is its spec (src/inference/models/specs.ts).
    models: MODEL_IDS.map(manifestFields).map((m) => {
      const parts = m.files.map((f) => content.get(f)!);
      const bytes = parts.reduce((a, b) => a + b.length, 0);
      return { ...m, size_mb: Math.round((bytes / 1e6) * 100) / 100, sha256: sha256(...parts) };
    }),
    vad: {
      file: VAD_FILE,
      model: `Silero VAD ${SHIPPED_SILERO} (MIT)`,
      source: { package: vad.source.package, version: vad.source.version, file: vad.source.file },
    },
  };
  fs.writeFileSync(path.join(outDir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  return manifest;
}

if (require.main === module) {
  const i = process.argv.indexOf('--out');
  const outDir = i > 0 ? path.resolve(process.argv[i + 1]) : loadConfig().modelsDir;
  const t0 = Date.now();
  const manifest = convertAll(outDir);
  for (const g of manifest.graphs) console.log(`${g.file}  ${(g.bytes / 1e6).toFixed(2)} MB  sha256 ${g.sha256.slice(0, 16)}…`);
  console.log(`wrote ${path.join(outDir, 'manifest.json')} (${manifest.models.length} models) in ${Date.now() - t0} ms`);
}
