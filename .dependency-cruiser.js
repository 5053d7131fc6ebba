// The layer rule (docs/ARCHITECTURE.md, "Layers"): folders of src/ form a stack and an import may only point to the
// same layer or one below. No cycles between files either. Run by `npm run deps:check`, which `npm test` includes
// (test/architecture.test.ts).
'use strict';

/** Bottom → top. A folder (or entry file) may import only from its own layer or the ones listed before it. */
const LAYERS = [
  ['config'],
  ['logging', 'startup', 'storage'],
  ['dsp'],
  ['audio'],
  ['db'],
  ['store'],
  ['shared-state'],
  ['vad'],
  ['inference'],
  ['live-protocol'],
  ['pipeline', 'video'],
  ['http', 'metrics', 'probes'],
  ['upstream'],
  ['gateway'],
  ['model-service'],
  ['jobs', 'streaming'],
  ['console'],
  ['file-process'],
  ['app'],
  ['server.ts', 'model-service-main.ts', 'cli'],
];

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const pathOf = (names) => `^src/(${names.map(esc).join('|')})(/|$)`;

const upward = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${layer.join('+')}`,
  comment: `${layer.join(', ')} may import only from layers below it (docs/ARCHITECTURE.md)`,
  severity: 'error',
  from: { path: pathOf(layer) },
  to: { path: pathOf(LAYERS.slice(i + 1).flat()) },
}));

module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'no-cycles',
      comment: 'no import cycles between files (and so none between folders)',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'dsp-is-self-contained',
      comment: 'src/dsp/ imports nothing else from src/',
      severity: 'error',
      from: { path: '^src/dsp/' },
      to: { path: '^src/', pathNot: '^src/dsp/' },
    },
    {
      name: 'inference-models-without-runtime',
      comment: 'the networks and chains (inference/models/) run anywhere: they do not import the worker runtime',
      severity: 'error',
      from: { path: '^src/inference/models/' },
      to: { path: '^src/inference/(runtime|live)/' },
    },
    {
      name: 'src-not-from-tests-or-scripts',
      comment: 'shipped code does not import tests or scripts',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|scripts)/' },
    },
    {
      name: 'every-folder-has-a-layer',
      comment: 'a new folder of src/ gets a place in LAYERS before anything may import it',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/', pathNot: pathOf(LAYERS.flat()) },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/dsp/wasm/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
