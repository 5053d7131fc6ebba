// Every way the project starts its servers passes the same node flags: `npm start` / `npm run model-service`
// (package.json), the Docker image's CMD, the scale-out compose file, and the load benchmark (which reads them from
// package.json). The flags are a measured tuning (docs/bench/history.md, "The servers' Node flag"); a launch point without them would run, and
// be measured, differently.
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { startScriptFlags } from '../../scripts/bench/load';

const read = (f: string) => fs.readFileSync(path.join(PROJECT_ROOT, f), 'utf8');

test('npm start, the model-service script, Dockerfile CMD, compose and the load bench use the same node flags', () => {
  const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
  const flags = startScriptFlags();
  expect(flags).toEqual(['--initial-old-space-size=128']);
  expect(scripts.start).toBe(`node ${flags.join(' ')} dist/src/server.js`);
  expect(scripts['model-service']).toBe(`node ${flags.join(' ')} dist/src/model-service-main.js`);
  const asJson = (entry: string) => JSON.stringify(['node', ...flags, entry]).replace(/,/g, ', ');
  expect(read('Dockerfile')).toContain(`CMD ${asJson('dist/src/server.js')}`);
  const compose = read('docker-compose.scale.yml');
  expect(compose).toContain(`command: ${asJson('dist/src/server.js')}`);
  expect(compose).toContain(`command: ${asJson('dist/src/model-service-main.js')}`);
  expect(compose).not.toMatch(/command: \["node", "dist\/src\/(server|model-service-main)\.js"\]/);
});
