// The layer rule (docs/ARCHITECTURE.md, "Layers"), checked on the real sources with dependency-cruiser and the
// project's own rule file: no import from a higher layer, no cycle between files, src/dsp/ self-contained. A second
// case runs the same rules on a small tree with one upward import and one cycle, so a rule file that stopped
// catching them would fail here too.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';

interface CruiseResult {
  summary: { violations: Array<{ rule: { name: string }; from: string; to: string }> };
}

const DEPCRUISE = path.join(PROJECT_ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

function cruise(cwd: string, configFile: string): Promise<CruiseResult> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [DEPCRUISE, 'src', '--config', configFile, '--output-type', 'json'],
      { cwd, maxBuffer: 64 * 1024 * 1024 },
      // Exit status is the number of errors; the JSON on stdout is what we read either way.
      (_err, stdout, stderr) => {
        try {
          resolve(JSON.parse(stdout) as CruiseResult);
        } catch {
          reject(new Error(`dependency-cruiser gave no JSON: ${stderr}`));
        }
      },
    );
  });
}

test('src/ has no upward import, no cycle, and dsp imports nothing else from src', async () => {
  const result = await cruise(PROJECT_ROOT, path.join(PROJECT_ROOT, '.dependency-cruiser.js'));
  const lines = result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
  expect(lines).toEqual([]);
}, 60_000);

test('the same rules catch an upward import, a cycle and a folder with no layer', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'));
  try {
    const write = (file: string, text: string): void => {
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), text);
    };
    write('src/config/index.ts', "import { ROUTE } from '../gateway/routes';\nexport const X = ROUTE;\n");
    write('src/gateway/routes.ts', "export const ROUTE = 1;\n");
    write('src/gateway/a.ts', "import { B } from './b';\nexport const A = B + 1;\n");
    write('src/gateway/b.ts', "import { A } from './a';\nexport const B = 2;\nexport const C = A;\n");
    write('src/dsp/fft.ts', "import { X } from '../config';\nexport const Y = X;\n");
    write('src/gateway/uses-new.ts', "import { Z } from '../brand-new/z';\nexport const W = Z;\n");
    write('src/brand-new/z.ts', "export const Z = 3;\n");
    write('tsconfig.json', JSON.stringify({ compilerOptions: { module: 'commonjs', strict: true }, include: ['src/**/*.ts'] }));
    const result = await cruise(dir, path.join(PROJECT_ROOT, '.dependency-cruiser.js'));
    const seen = result.summary.violations.map((v) => `${v.rule.name} ${v.from} ${v.to}`);
    expect(seen).toEqual(
      expect.arrayContaining([
        'layer-config src/config/index.ts src/gateway/routes.ts',
        expect.stringMatching(/^no-cycles src\/gateway\/[ab]\.ts src\/gateway\/[ab]\.ts$/),
        'dsp-is-self-contained src/dsp/fft.ts src/config/index.ts',
        'every-folder-has-a-layer src/gateway/uses-new.ts src/brand-new/z.ts',
      ]),
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
