// The model specs (src/inference/models/specs.ts): validate() refuses specs the engine could not run as described, the
// declared latencies and graph files match the chains as built, and the manifest's model entries come from the specs.
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { createChain } from '../../src/inference/models/chains';
import { DtlnGraphs } from '../../src/inference/models/dtln';
import {
  graphsFor,
  manifestFields,
  MODELS,
  NSM3_POSTFILTER,
  RESIDUAL_GATE,
  STAGE1_FILE,
  STAGE2_FILE,
  streamLayout,
  validate,
  validateAll,
  type ModelSpec,
} from '../../src/inference/models/specs';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { MODEL_IDS } from '../../src/inference/types';

const config = loadConfig();

/** A copy of nsm-2's spec with `change` applied. */
const nsm2With = (change: Partial<ModelSpec>): ModelSpec => ({ ...MODELS['nsm-2'], ...change });

describe('validate()', () => {
  it('accepts every shipped spec', () => {
    for (const id of MODEL_IDS) expect(() => validate(MODELS[id])).not.toThrow();
  });

  it.each<[string, Partial<ModelSpec>, RegExp]>([
    ['graph files the chain does not run', { graphs: [STAGE1_FILE] }, /graphs \[dtln_stage1.onnx\], but the chain runs/],
    ['graph files in another order', { graphs: [STAGE2_FILE, STAGE1_FILE] }, /but the chain runs/],
    ['a 16 kHz model always full band', { fullBand: 'always' }, /16000 Hz model runs full band 'on-request'/],
    ['a 48 kHz model full band on request', { sampleRate: 48000 }, /48000 Hz model runs full band 'always'/],
    ['another rate', { sampleRate: 44100 as ModelSpec['sampleRate'] }, /sample rate 44100/],
    ['no stage', { chain: [], graphs: [] }, /the chain has no stage/],
    ['a stage with two kinds', { chain: [{ dtln: {}, stage1: { hop: 256 } } as never] }, /exactly one of dtln, stage1, postFilter, gate/],
    ['repeated grid offsets', { chain: [{ dtln: { grids: [0, 0] } }] }, /grids must be distinct sample offsets/],
    ['a negative grid offset', { chain: [{ dtln: { grids: [-64, 0] } }] }, /grids must be distinct sample offsets/],
    ['a fractional stage-1 hop', { chain: [{ stage1: { hop: 25.6 } }], graphs: [STAGE1_FILE] }, /hop must be a positive integer/],
    ['a non-finite post-filter option', { chain: [{ dtln: {} }, { postFilter: { ...NSM3_POSTFILTER, overSubtract: NaN } }] }, /overSubtract must be finite/],
    ['a fractional latency', { latency: { samples: 384.5, fullBandSamples: 2416 } }, /latencies must be sample counts/],
    ['no cost', { relativeCost: 0 }, /relative cost must be positive/],
    ['an empty label', { label: ' ' }, /label and description must not be empty/],
  ])('refuses %s', (_what, change, message) => {
    expect(() => validate(nsm2With(change))).toThrow(message);
  });

  it('names the model and every problem at once', () => {
    expect(() => validate(nsm2With({ relativeCost: -1, label: '' }))).toThrow(
      /^model nsm-2: label and description must not be empty; relative cost must be positive$/,
    );
  });

  it('validateAll() wants exactly MODEL_IDS, in order, each under its own id', () => {
    const all = { ...MODELS } as Record<string, ModelSpec>;
    expect(validateAll(all)).toBe(all);
    const { 'nsm-3': _dropped, ...missing } = all;
    expect(() => validateAll(missing)).toThrow(/are not MODEL_IDS/);
    expect(() => validateAll({ ...all, 'nsm-9': MODELS['nsm-2'] })).toThrow(/are not MODEL_IDS/);
    expect(() => validateAll({ ...all, 'nsm-3': MODELS['nsm-2'] })).toThrow(/the spec under nsm-3 says it is nsm-2/);
  });
});

describe('the specs against what runs', () => {
  let graphs: DtlnGraphs;
  beforeAll(async () => {
    graphs = await loadGraphs(config.modelsDir);
  });

  it.each(MODEL_IDS.map((m) => [m]))('%s: the declared latencies and rates are those of the chain as built', (m) => {
    const spec = MODELS[m];
    const own = createChain(m, 1, graphs);
    const full = createChain(m, 1, graphs, { fullBand: true });
    expect([own.sampleRate, own.latency]).toEqual([spec.sampleRate, spec.latency.samples]);
    expect([full.sampleRate, full.latency]).toEqual([48000, spec.latency.fullBandSamples]);
    expect(streamLayout(m, false).sampleRate).toBe(spec.sampleRate);
    expect(streamLayout(m, true).sampleRate).toBe(48000);
  });

  it('graphsFor() names what each kind of stage runs', () => {
    expect(graphsFor([{ stage1: { hop: 256 } }])).toEqual([STAGE1_FILE]);
    expect(graphsFor([{ dtln: { stage2: false } }, { postFilter: NSM3_POSTFILTER }])).toEqual([STAGE1_FILE]);
    expect(graphsFor([{ gate: RESIDUAL_GATE }, { dtln: {} }])).toEqual([STAGE1_FILE, STAGE2_FILE]);
    expect(graphsFor([{ postFilter: NSM3_POSTFILTER }])).toEqual([]);
  });

  it("models/manifest.json's model entries are the specs' fields, keys in the same order", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(config.modelsDir, 'manifest.json'), 'utf8')) as {
      models: Array<Record<string, unknown>>;
    };
    const written = manifest.models.map(({ size_mb: _s, sha256: _h, ...fields }) => fields);
    expect(JSON.stringify(written)).toBe(JSON.stringify(MODEL_IDS.map(manifestFields)));
  });
});
