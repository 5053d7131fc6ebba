// The dependency check (knip.jsonc): every package in package.json is used and every imported package is listed;
// every runtime dependency is imported by shipped code, which imports no devDependency. A third case runs the same
// configuration on a small tree that breaks each rule once, so a configuration that stopped catching them fails here.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';

const KNIP = path.join(PROJECT_ROOT, 'node_modules', 'knip', 'bin', 'knip.js');

interface Named {
  name: string;
}
interface KnipFileIssues {
  file: string;
  [kind: string]: string | Named[];
}

/** knip's findings as "kind name (file)" lines; [] when there are none. */
function knip(cwd: string, extra: string[] = []): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [KNIP, '--reporter', 'json', '--no-progress', ...extra],
      { cwd, maxBuffer: 16 * 1024 * 1024 },
      // Exits 1 when it finds something; the JSON on stdout is what we read either way.
      (_err, stdout, stderr) => {
        try {
          const { issues } = JSON.parse(stdout) as { issues: KnipFileIssues[] };
          const lines: string[] = [];
          for (const entry of issues) {
            for (const [kind, found] of Object.entries(entry)) {
              if (Array.isArray(found)) for (const f of found) lines.push(`${kind} ${f.name} (${entry.file})`);
            }
          }
          resolve(lines.sort());
        } catch {
          reject(new Error(`knip gave no JSON: ${stderr}${stdout}`));
        }
      },
    );
  });
}

test('every package in package.json is used, and every package the code imports is listed', async () => {
  expect(await knip(PROJECT_ROOT)).toEqual([]);
}, 60_000);

test('every runtime dependency is imported by shipped code, and shipped code imports no devDependency', async () => {
  // --strict: only the entries marked "!" in knip.jsonc, and only "dependencies" count as installed.
  expect(await knip(PROJECT_ROOT, ['--strict'])).toEqual([]);
}, 60_000);

test('the same configuration catches an unused, an unlisted, a script-only and a dev-only dependency', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deps-'));
  try {
    const write = (file: string, text: string): void => {
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), text);
    };
    fs.copyFileSync(path.join(PROJECT_ROOT, 'knip.jsonc'), path.join(dir, 'knip.jsonc'));
    write(
      'package.json',
      JSON.stringify({
        name: 'deps-check',
        version: '1.0.0',
        private: true,
        dependencies: { 'used-dep': '1.0.0', 'unused-dep': '1.0.0', 'script-only-dep': '1.0.0' },
        devDependencies: { 'dev-dep': '1.0.0' },
      }),
    );
    write('src/server.ts', "import a from 'used-dep';\nimport b from 'dev-dep';\nimport c from 'not-listed';\nexport const x = [a, b, c];\n");
    write('scripts/convert-models.ts', "import s from 'script-only-dep';\nconsole.log(s);\n");

    expect(await knip(dir)).toEqual(['dependencies unused-dep (package.json)', 'unlisted not-listed (src/server.ts)']);
    expect(await knip(dir, ['--strict'])).toEqual([
      'dependencies script-only-dep (package.json)',
      'dependencies unused-dep (package.json)',
      'unlisted dev-dep (src/server.ts)',
      'unlisted not-listed (src/server.ts)',
    ]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
