// The table of environment variables in docs/operations.md is generated from the schema (npm run docs:config):
// this fails when someone changes one without the other.
import fs from 'node:fs';
import { VARIABLES } from '../../src/config/env';
import { DOCS_FILE, withConfigTable } from '../../scripts/docs-config';

test('docs/operations.md has the table the schema generates (run npm run docs:config after changing src/config/env.ts)', () => {
  const docs = fs.readFileSync(DOCS_FILE, 'utf8');
  expect(docs).toBe(withConfigTable(docs));
  for (const name of Object.keys(VARIABLES)) expect(docs).toContain(`| \`${name}\` |`);
});
