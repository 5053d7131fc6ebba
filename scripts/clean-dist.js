#!/usr/bin/env node
// Removes dist/ before a build, so a module that moved or was deleted in src/ leaves no stale compiled copy behind
// (require('../config') would still find an old dist/src/config.js next to the new dist/src/config/index.js).
// Plain JavaScript: it runs before anything is compiled.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

fs.rmSync(path.join(__dirname, '..', 'dist'), { recursive: true, force: true });
