// `keys webhook-secret`: the workspace's webhook signing secret, shown and rotated from the keys CLI (same value the
// dispatcher signs with, stored in the job queue).
import fs from 'node:fs';
import { runKeysCli } from '../../src/cli/keys';
import { openJobStore } from '../../src/store/jobs';
import { testConfig } from '../helpers/service-helpers';

test('keys webhook-secret shows the secret (created once) and --rotate replaces it', async () => {
  const config = testConfig();
  try {
    const lines: string[] = [];
    const errors: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => errors.push(l) };
    expect(await runKeysCli(['create', '--workspace', 'hooks'], config, io)).toBe(0);
    lines.length = 0;
    expect(await runKeysCli(['webhook-secret', '--workspace', 'hooks'], config, io)).toBe(0);
    const first = lines[lines.length - 1];
    expect(first).toMatch(/^whsec_[A-Za-z0-9]{32}$/);
    expect(await runKeysCli(['webhook-secret', '--workspace', 'hooks'], config, io)).toBe(0);
    expect(lines[lines.length - 1]).toBe(first);
    expect(await runKeysCli(['webhook-secret', '--workspace', 'hooks', '--rotate'], config, io)).toBe(0);
    const rotated = lines[lines.length - 1];
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(first);
    const jobs = await openJobStore(config);
    expect(lines.join('\n')).toContain('rotated the webhook signing secret of hooks');
    // The stored secret is the one printed.
    const { openStore } = await import('../../src/store');
    const store = await openStore(config);
    const workspace = await store.getWorkspaceByName('hooks');
    expect(await jobs.webhookSecret(workspace!.id)).toBe(rotated);
    await store.close();
    await jobs.close();
    expect(await runKeysCli(['webhook-secret', '--workspace', 'nope'], config, io)).toBe(1);
    expect(await runKeysCli(['webhook-secret'], config, io)).toBe(2);
    expect(await runKeysCli(['webhook-secret', '--workspace', 'hooks', '--plan', 'free'], config, io)).toBe(2);
  } finally {
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  }
});
