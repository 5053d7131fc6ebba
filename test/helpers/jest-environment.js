// Jest runs tests in a separate V8 context whose typed-array constructors differ from Node's own.
// onnxruntime-node builds output tensors with Node's constructors and then checks them with
// `instanceof` against the test's, which fails. Sharing the host constructors removes the mismatch.
const { TestEnvironment } = require('jest-environment-node');

const SHARED = [
  'ArrayBuffer', 'SharedArrayBuffer', 'Uint8Array', 'Uint8ClampedArray', 'Int8Array', 'Uint16Array', 'Int16Array',
  'Uint32Array', 'Int32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array', 'DataView',
];

class HostTypedArraysEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    for (const name of SHARED) this.global[name] = globalThis[name];
  }
}

module.exports = HostTypedArraysEnvironment;
