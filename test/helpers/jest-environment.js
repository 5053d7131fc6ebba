// Jest runs tests in a separate V8 context whose typed-array constructors differ from Node's own.
// onnxruntime-node builds output tensors with Node's constructors and then checks them with
// `instanceof` against the test's, which fails. Sharing the host constructors removes the mismatch.
// NSM_LEAK_LOG=FILE (a diagnostic, off by default): after each test file, append what it left running in the jest
// worker (timers, sockets, servers, child processes: process.getActiveResourcesInfo()) to FILE, one JSON line per
// file, to find the file behind Jest's "a worker process has failed to exit gracefully".
const fs = require('node:fs');
const { TestEnvironment } = require('jest-environment-node');

const SHARED = [
  'ArrayBuffer', 'SharedArrayBuffer', 'Uint8Array', 'Uint8ClampedArray', 'Int8Array', 'Uint16Array', 'Int16Array',
  'Uint32Array', 'Int32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array', 'DataView',
];

// Worker threads keep the process alive too but are not among the active resources: count the live ones (diagnostic only).
const liveWorkers = new Map();
if (process.env.NSM_LEAK_LOG) {
  const threads = require('node:worker_threads');
  const Original = threads.Worker;
  threads.Worker = class CountedWorker extends Original {
    constructor(file, options) {
      super(file, options);
      liveWorkers.set(this, String(file).split('/').slice(-3).join('/'));
      this.once('exit', () => liveWorkers.delete(this));
    }
  };
}

class HostTypedArraysEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
    for (const name of SHARED) this.global[name] = globalThis[name];
  }

  async teardown() {
    await super.teardown();
    const log = process.env.NSM_LEAK_LOG;
    if (!log) return;
    // A moment for closes already under way (a socket's close event, a child's exit) to land.
    await new Promise((r) => setTimeout(r, 200));
    const counts = {};
    for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
    for (const file of liveWorkers.values()) counts[`Worker ${file}`] = (counts[`Worker ${file}`] ?? 0) + 1;
    fs.appendFileSync(log, `${JSON.stringify({ file: this.testPath, worker: process.env.JEST_WORKER_ID, pid: process.pid, resources: counts })}\n`);
  }
}

module.exports = HostTypedArraysEnvironment;
