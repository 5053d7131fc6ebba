// Tests are written in TypeScript under test/ and run from their compiled form in dist/test,
// so worker threads and child processes load the same compiled code the service ships.
module.exports = {
  testEnvironment: '<rootDir>/test/helpers/jest-environment.js',
  roots: ['<rootDir>/dist/test'],
  testMatch: ['**/*.test.js'],
  testTimeout: 120000,
};
