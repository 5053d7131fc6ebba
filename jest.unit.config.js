// The unit tier, `npm run test:unit`: the tests that start no server, child process (ffmpeg included) or browser,
// a subset of `npm test`'s (jest.config.js) that runs in under a minute: every file under test/unit/. The guard
// test/helpers/unit-tier-guard.js makes starting a child process or a server throw here, so a file in that folder
// that starts to do either fails.
const base = require('./jest.config.js');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/dist/test/unit/**/*.test.js'],
  setupFilesAfterEnv: ['<rootDir>/test/helpers/unit-tier-guard.js'],
};
