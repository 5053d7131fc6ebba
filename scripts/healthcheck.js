#!/usr/bin/env node
// Docker HEALTHCHECK: GET http://127.0.0.1:$PORT/healthz must answer 200 within 3 s (the slim image has no curl).
// Exit 0 healthy, 1 unhealthy, as Docker expects.
'use strict';
const http = require('node:http');

const port = Number(process.env.PORT) || 8080;
const req = http.get({ host: '127.0.0.1', port, path: '/healthz', timeout: 3000 }, (res) => {
  res.resume();
  process.exit(res.statusCode === 200 ? 0 : 1);
});
req.on('timeout', () => req.destroy(new Error('timeout')));
req.on('error', (err) => {
  process.stderr.write(`healthcheck: ${err.message}\n`);
  process.exit(1);
});
