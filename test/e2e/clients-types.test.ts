// The TypeScript client's types are generated from openapi.json (openapi-typescript, `npm run clients:types`): they
// are regenerated here and must equal the committed clients/typescript/src/openapi.ts, so a change to the API
// document that was not carried to the client fails here.
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { makeTmpDir } from '../helpers/audio-helpers';
import { run } from '../helpers/clients-helpers';

test('clients/typescript/src/openapi.ts is what openapi-typescript makes of openapi.json today', async () => {
  const tmp = makeTmpDir('nsm-openapi-ts-');
  try {
    const out = path.join(tmp, 'openapi.ts');
    // The same command as `npm run clients:types`, writing elsewhere.
    const r = await run(process.execPath, [path.join(PROJECT_ROOT, 'node_modules/openapi-typescript/bin/cli.js'), 'openapi.json', '-o', out], { cwd: PROJECT_ROOT, timeoutMs: 60_000 });
    expect(r.code).toBe(0);
    const fresh = fs.readFileSync(out, 'utf8');
    const committed = fs.readFileSync(path.join(PROJECT_ROOT, 'clients/typescript/src/openapi.ts'), 'utf8');
    expect(fresh.length).toBeGreaterThan(10_000);
    if (fresh !== committed) {
      throw new Error('clients/typescript/src/openapi.ts is out of date with openapi.json: run `npm run clients:types` and commit it');
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
