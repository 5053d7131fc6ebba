#!/usr/bin/env node
// `npm run build`: dist/ from scratch — the TypeScript (tsc) and the WebAssembly kernels of src/dsp/wasm/ (asc), run
// side by side, as many at once as the machine has cores. One after the other they took 36 s on the 2-core machine
// (tsc 16 s, the six kernels 20 s); this is the first step of every fresh clone's `npm test`.
//
//   node scripts/build.js           clean dist/, then tsc and the kernels
//   node scripts/build.js --wasm    the kernels only (`npm run build:wasm`)
//
// Plain JavaScript: it runs before anything is compiled.
'use strict';
const { spawn } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
/** A package's command-line program, run with this Node (resolved through the package, so the dependency check sees it). */
const program = (packageJson, name) => path.join(path.dirname(packageJson), require(packageJson).bin[name]);
/** Kernels: src/dsp/wasm/<name>.ts → dist/src/dsp/wasm/<name>.wasm (loaded by src/dsp/wasm-load.ts). */
const KERNELS = ['dtln-dsp', 'fft-pairs', 'bin-gains', 'aec', 'aec-hop', 'halfband'];
const ASC_FLAGS = ['-O3', '--runtime', 'stub', '--noAssert', '--importMemory', '--initialMemory', '1', '--enable', 'simd'];

/** What to run: resolved when the build runs (ensure-ready.js reads KERNELS before node_modules exists). */
function buildTasks(wasmOnly) {
  const asc = program(require.resolve('assemblyscript/package.json'), 'asc');
  const tasks = KERNELS.map((k) => ({
    name: `asc ${k}`,
    args: [asc, `src/dsp/wasm/${k}.ts`, '-o', `dist/src/dsp/wasm/${k}.wasm`, ...ASC_FLAGS],
  }));
  // tsc first: the longest task, so it never waits for a free slot at the end.
  if (!wasmOnly) tasks.unshift({ name: 'tsc', args: [program(require.resolve('typescript/package.json'), 'tsc'), '-p', 'tsconfig.json'] });
  return tasks;
}

/** Runs one task; its output is printed as one block when it ends, so that parallel tasks do not interleave. */
function run(task) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, task.args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', (err) => resolve({ task, ok: false, out: `${out}${err.message}\n` }));
    child.on('close', (code) => resolve({ task, ok: code === 0, out }));
  });
}

async function main() {
  const wasmOnly = process.argv.includes('--wasm');
  if (!wasmOnly) require('./clean-dist.js');
  const queue = buildTasks(wasmOnly);
  const slots = Math.max(1, Math.min(queue.length, os.availableParallelism?.() ?? os.cpus().length));
  const failed = [];
  await Promise.all(
    Array.from({ length: slots }, async () => {
      for (let t = queue.shift(); t; t = queue.shift()) {
        const r = await run(t);
        if (r.out.trim()) process.stderr.write(r.out.endsWith('\n') ? r.out : `${r.out}\n`);
        if (!r.ok) failed.push(r.task.name);
      }
    }),
  );
  if (failed.length > 0) {
    console.error(`build failed: ${failed.join(', ')}`);
    process.exit(1);
  }
}

// ensure-ready.js reads the kernel list to tell whether a dist/ lacks one.
module.exports = { KERNELS };
if (require.main === module) main();
