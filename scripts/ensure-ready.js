#!/usr/bin/env node
// Runs before `npm start` / `npm test` so that each works on a fresh clone as the one command the README gives:
// installs the dependencies when node_modules is missing (their install step builds TypeScript and converts the
// models), and rebuilds what is missing otherwise. Plain JavaScript: it must run before anything is compiled.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const want = process.argv.slice(2); // 'build', 'models'
const exists = (p) => fs.existsSync(path.join(root, p));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function run(args) {
  console.error(`[setup] npm ${args.join(' ')}`);
  const r = spawnSync(npm, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

if (!exists('node_modules/.package-lock.json')) {
  run([exists('package-lock.json') ? 'ci' : 'install']); // also runs prepare: build + models
} else {
  if (want.includes('build') && !exists('dist/src/server.js')) run(['run', 'build']);
  const modelsDir = process.env.MODELS_DIR ? path.resolve(process.env.MODELS_DIR) : path.join(root, 'models');
  const modelsReady = ['dtln_stage1.onnx', 'dtln_stage2.onnx', 'manifest.json', 'sample.wav'].every((f) =>
    fs.existsSync(path.join(modelsDir, f)),
  );
  if (want.includes('models') && !modelsReady) run(['run', 'models']);
}
