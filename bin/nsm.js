#!/usr/bin/env node
'use strict';
// Thin launcher: the CLI is compiled TypeScript (npm run build).
const { main } = require('../dist/src/cli/nsm.js');
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`nsm: ${(err && err.stack) || err}\n`);
    process.exitCode = 1;
  },
);
