// The unit tier, `npm run test:unit`: the tests that start no server, child process (ffmpeg included) or browser,
// a subset of `npm test`'s (jest.config.js) that runs in under a minute. test/unit-tier-guard.js makes starting a
// child process or a server throw here, so a file listed below that starts to do either fails.
const base = require('./jest.config.js');

const UNIT_TESTS = [
  'audio-dither',
  'upstream-watchdogs',
  'bench-stats',
  'console-auth',
  'app-closer',
  'cpu-quota',
  'dsp-aec',
  'dsp-aec-stream',
  'image',
  'gateway-policy-*',
  'inference-batching',
  'inference-models',
  'inference-bin-gains',
  'inference-cascade',
  'inference-engine',
  'inference-fft-pairs',
  'inference-gate',
  'inference-live-pool',
  'jobs-keys-cli',
  'jobs-openapi',
  'jobs-routes',
  'launch-flags',
  'server-binaries',
  'store',
  'streaming-leases',
  'vad-batch',
  'vad-decisions',
];

module.exports = {
  ...base,
  testMatch: UNIT_TESTS.map((name) => `<rootDir>/dist/test/${name}.test.js`),
  setupFilesAfterEnv: ['<rootDir>/test/unit-tier-guard.js'],
};
