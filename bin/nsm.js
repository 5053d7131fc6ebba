#!/usr/bin/env node
'use strict';
// `nsm`: launches the compiled CLI of the clone this file belongs to. Node runs the real path of this file, so a link
// to it (`npm link --ignore-scripts`, or ln -s into ~/bin) works from any directory and finds dist/ without rebuilding.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const entry = path.join(root, 'dist', 'src', 'cli', 'nsm.js');
if (!fs.existsSync(entry)) {
  process.stderr.write(`nsm: the CLI is not built (${path.relative(root, entry)} is missing): run "npm run build" in ${root}\n`);
  process.exit(1);
}
const { main } = require(entry);
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`nsm: ${(err && err.stack) || err}\n`);
    process.exitCode = 1;
  },
);
