// Tests are written in TypeScript under test/ and run from their compiled form in dist/test,
// so worker threads and child processes load the same compiled code the service ships.
module.exports = {
  testEnvironment: '<rootDir>/test/helpers/jest-environment.js',
  roots: ['<rootDir>/dist/test'],
  testMatch: ['**/*.test.js'],
  testTimeout: 120000,
  // The tests are compiled JavaScript already and mock no module (no jest.mock to hoist): babel-jest's pass over every
  // module a file loads bought nothing and cost ~5 % of a file's CPU with its cache warm, more on a fresh clone.
  transform: {},
  // Each module jest loads gets `Math` as a parameter of its wrapper, not a lookup of the test context's global,
  // which goes through the vm context's interceptor on every call: the DSP that tests run in-process (the echo
  // canceller, the scenes, the metrics) ran 25-45 % faster (dsp-aec-near-end 12.1 → 7.7 s), the suite's per-file
  // sum 1207 → 1162 s (docs/testing.md). Only Math: a name a module declares itself (readable-stream's `Number`)
  // collides with the parameter and fails to parse.
  sandboxInjectedGlobals: ['Math'],
};
