// What the Docker image and the compose files promise, checked on the files themselves (no Docker engine needed):
// the runtime stage's node_modules is the lockfile's production tree and holds no build-only package, /metrics is
// never open in compose, and the containers get CPU and memory limits that WORKERS follows.
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';

const read = (f: string) => fs.readFileSync(path.join(PROJECT_ROOT, f), 'utf8');

/** Packages only the build, the model conversion, the tests or the linters use: none may reach the image. */
const BUILD_ONLY = [
  '@vonage/noise-suppression',
  'onnx-proto',
  'protobufjs',
  'flatbuffers',
  'typescript',
  'assemblyscript',
  'dependency-cruiser',
  'knip',
  'jest',
  'playwright-core',
  'supertest',
  '@jitsi/rnnoise-wasm',
];

/** The Dockerfile split at each FROM: stage name (or "final") → its lines. */
function stages(dockerfile: string): Map<string, string> {
  const out = new Map<string, string>();
  const parts = dockerfile.split(/^(?=FROM )/m).slice(1);
  parts.forEach((part, i) => {
    const name = /^FROM \S+ AS (\S+)/.exec(part)?.[1] ?? (i === parts.length - 1 ? 'final' : `stage${i}`);
    out.set(name, part);
  });
  return out;
}

describe('the runtime image holds only what runs', () => {
  test('the production tree of the lockfile (npm ci --omit=dev) has no build-only package', () => {
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { dev?: boolean }> };
    const production = Object.entries(lock.packages)
      .filter(([key, entry]) => key !== '' && !entry.dev)
      .map(([key]) => key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length));
    expect(production.length).toBeGreaterThan(50);
    expect(production.filter((name) => BUILD_ONLY.includes(name) || name.startsWith('@types/'))).toEqual([]);
    // Each build-only package is still in the lockfile, as a development one (the build stage needs it).
    for (const name of BUILD_ONLY) expect(lock.packages[`node_modules/${name}`]).toMatchObject({ dev: true });
  });

  test('the final stage takes node_modules from an npm ci --omit=dev stage, and dist/src only from the build', () => {
    const s = stages(read('Dockerfile'));
    const final = s.get('final')!;
    const copies = final.split('\n').filter((l) => l.startsWith('COPY'));
    expect(copies.filter((l) => l.includes('node_modules'))).toEqual(['COPY --from=deps /app/node_modules ./node_modules']);
    expect(s.get('deps')).toMatch(/^RUN npm ci --omit=dev /m);
    expect(s.get('deps')).not.toMatch(/COPY \. \./);
    expect(copies).toContain('COPY --from=build /app/dist/src ./dist/src');
    expect(copies.filter((l) => /\/app\/dist(\s|\/test|\/scripts)/.test(l))).toEqual([]);
    expect(copies.filter((l) => !l.startsWith('COPY --from='))).toEqual([]);
    // The base can be swapped (a local one for a test build), the default is the official Node image.
    expect(read('Dockerfile')).toMatch(/^ARG NODE_IMAGE=node:\d+-[a-z]+-slim$/m);
    expect(s.get('toolchain')).toMatch(/^FROM \$\{NODE_IMAGE\} AS toolchain/);
    expect(final).toMatch(/^FROM \$\{RUNTIME_IMAGE\}\n/);
  });
});

describe('compose: metrics, limits, workers', () => {
  test('docker-compose.yml requires METRICS_TOKEN, limits CPU and memory, and leaves WORKERS to the CPU limit', () => {
    const compose = read('docker-compose.yml');
    expect(compose).toMatch(/^ {6}METRICS_TOKEN: \$\{METRICS_TOKEN:\?[^}]+\}$/m);
    expect(compose).toMatch(/^ {10}cpus: "\$\{NSM_CPUS:-\d+\}"$/m);
    expect(compose).toMatch(/^ {10}memory: \$\{NSM_MEMORY:-\d+g\}$/m);
    expect(compose).toMatch(/^ {6}WORKERS: \$\{WORKERS:-\}/m);
  });

  test('docker-compose.scale.yml: every gateway and model service requires METRICS_TOKEN and has limits', () => {
    const compose = read('docker-compose.scale.yml');
    // Top-level sections: the x-gateway and x-model anchors are what every gateway and model service is made of.
    const sections = compose.split(/^(?=\S)/m);
    for (const anchor of ['x-gateway', 'x-model']) {
      const section = sections.find((part) => part.startsWith(`${anchor}:`))!;
      expect(section).toMatch(/METRICS_TOKEN: \$\{METRICS_TOKEN:\?[^}]+\}/);
      expect(section).toMatch(/limits:\n\s+cpus: "\$\{[A-Z_]+:-\d+\}"\n\s+memory: \$\{[A-Z_]+:-\d+g\}/);
    }
    expect(compose).toMatch(/^ {4}WORKERS: \$\{MODEL_WORKERS:-\}$/m);
    expect(read('deploy/scale.env.example')).toMatch(/^METRICS_TOKEN=/m);
  });
});
