// The unit tier (test/unit/, jest.unit.config.js, `npm run test:unit`) holds tests that start no child process and no server:
// here starting either throws, so a test that does cannot stay in that tier unnoticed. Plain JavaScript, like
// jest-environment.js: jest loads it from test/helpers/ before each test file.
'use strict';
const childProcess = require('node:child_process');
const net = require('node:net');

const SPAWNERS = ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'];
const saved = new Map(SPAWNERS.map((name) => [name, childProcess[name]]));
const savedListen = net.Server.prototype.listen;

function refuse(what) {
  throw new Error(`unit tier: this test ${what}; take it out of jest.unit.config.js (npm test still runs it)`);
}

// Node's core modules are shared by every test file in the process, so patch them for this file and put them back.
beforeAll(() => {
  for (const name of SPAWNERS) childProcess[name] = () => refuse(`starts a child process (${name})`);
  net.Server.prototype.listen = () => refuse('starts a server (listen)');
});
afterAll(() => {
  for (const [name, fn] of saved) childProcess[name] = fn;
  net.Server.prototype.listen = savedListen;
});
