#!/usr/bin/env node
// Runs before `npm start`, `npm run model-service` and `npm test` so that each works on a fresh clone as the one
// command the README gives:
//
//   node scripts/ensure-ready.js [--fresh | --changed] build models
//
// - dependencies missing (fresh clone, or a dependency added since the last install): `npm ci`, whose `prepare`
//   step compiles the TypeScript and converts the models; nothing else is run after it (no audit: a round trip to the
//   registry that `npm test` has no use for);
// - otherwise `build` / `models` run when their output is missing, or always with --fresh (what `npm test` wants:
//   the tests run from dist/, so it must match the sources). Either way each runs at most once;
// - with --changed (what `npm run test:unit` wants), `build` runs only when dist/ no longer matches the sources:
//   a TypeScript file under src/, scripts/ or test/ (or tsconfig.json, package.json) is newer than the last build,
//   or dist/ holds a compiled file whose source is gone.
//
// onnxruntime-node's install script would download CUDA provider libraries from NuGet on linux/x64; the CPU
// binaries we use ship inside the package, so the install runs with ONNXRUNTIME_NODE_INSTALL=skip (the variable that
// script reads). Plain JavaScript: it must run before anything is compiled.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { KERNELS } = require('./build.js');

const root = path.resolve(__dirname, '..');
const args = process.argv.slice(2);
const fresh = args.includes('--fresh');
const changed = args.includes('--changed');
const want = args.filter((a) => !a.startsWith('--')); // 'build', 'models'
const exists = (p) => fs.existsSync(path.join(root, p));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function run(npmArgs, env = process.env) {
  console.error(`[setup] npm ${npmArgs.join(' ')}`);
  const r = spawnSync(npm, npmArgs, { cwd: root, stdio: 'inherit', env });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

/** Direct dependencies (package.json) that are not in node_modules: a fresh clone, or the lockfile moved on. */
function missingDependencies() {
  if (!exists('node_modules/.package-lock.json')) return ['(node_modules)'];
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const names = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.devDependencies ?? {})];
  return names.filter((name) => !exists(path.join('node_modules', name, 'package.json')));
}

function walk(dir, visit) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(p, visit);
    else visit(p);
  }
}

/** For --changed: whether dist/ is older than a source, or holds a module whose source was moved or deleted. */
function buildIsStale() {
  // tsc writes server.js early in the build, so a source saved while a build ran still counts as newer.
  const builtAt = fs.statSync(path.join(root, 'dist/src/server.js')).mtimeMs;
  const newer = (p) => fs.statSync(p).mtimeMs > builtAt;
  let stale = ['tsconfig.json', 'package.json'].some((f) => newer(path.join(root, f)));
  for (const top of ['src', 'scripts', 'test']) {
    walk(path.join(root, top), (p) => {
      if (!stale && p.endsWith('.ts') && newer(p)) stale = true;
    });
    const out = path.join(root, 'dist', top);
    if (fs.existsSync(out)) {
      walk(out, (p) => {
        if (!stale && p.endsWith('.js') && !fs.existsSync(path.join(root, path.relative(path.join(root, 'dist'), p)).replace(/\.js$/, '.ts'))) stale = true;
      });
    }
  }
  return stale;
}

const absent = missingDependencies();
if (absent.length > 0) {
  if (absent[0] !== '(node_modules)') console.error(`[setup] not installed: ${absent.join(', ')}`);
  // Also runs prepare: build + models.
  run([exists('package-lock.json') ? 'ci' : 'install', '--no-audit', '--no-fund'], { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' });
} else {
  // The WebAssembly kernels are built by the same step (a dist/ from before they existed lacks them).
  if (want.includes('build') && (fresh || !exists('dist/src/server.js') || KERNELS.some((k) => !exists(`dist/src/dsp/wasm/${k}.wasm`)) || (changed && buildIsStale()))) run(['run', 'build']);
  const modelsDir = process.env.MODELS_DIR ? path.resolve(process.env.MODELS_DIR) : path.join(root, 'models');
  const modelsReady = ['dtln_stage1.onnx', 'dtln_stage2.onnx', 'manifest.json', 'sample.wav'].every((f) =>
    fs.existsSync(path.join(modelsDir, f)),
  );
  if (want.includes('models') && (fresh || !modelsReady)) run(['run', 'models']);
}
