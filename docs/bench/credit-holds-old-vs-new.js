// Side-by-side measurement behind docs/gateway.md ("State sits behind GatewayStore"): time per credit reserve +
// settle of the gateway store written once over src/db/dialect.ts (this tree) against the engine-specific stores it
// replaced (commit 1867fbc), on SQLite and on a real PostgreSQL server (test/helpers/real-servers.ts), with 1 and 8 callers on
// one workspace, in alternating rounds (so the load of a shared machine falls on both). Run from the repository root:
//
//   npm run build
//   mkdir -p /tmp/old-store && git archive 1867fbc src tsconfig.json | tar -x -C /tmp/old-store
//   ln -s "$PWD/node_modules" /tmp/old-store/node_modules && (cd /tmp/old-store && npx tsc -p tsconfig.json)
//   node docs/bench/credit-holds-old-vs-new.js /tmp/old-store
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const OLD = path.resolve(process.argv[2] ?? '/tmp/old-store', 'dist/src/store/index.js');
const NEW = path.resolve('dist/src/store/index.js');
const { startPostgres } = require(path.resolve('dist/test/helpers/real-servers.js'));
const ROUNDS = 10;
const CALLS = 2000;

async function round(module, config, callers) {
  const store = await require(module).openStore(config);
  const ws = (await store.createWorkspace(`bench-${Math.random()}`, 'free')).id;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      for (let i = 0; i < CALLS / callers; i++) {
        const r = await store.reserveCredits(ws, 1, 1e9, new Date(), 60_000);
        await store.settleReservation(r.reservation);
      }
    }),
  );
  const us = Number(process.hrtime.bigint() - t0) / 1e3 / CALLS;
  await store.close();
  return us;
}

(async () => {
  const pg = await startPostgres();
  let n = 0;
  const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
  try {
    for (const engine of ['sqlite', 'postgres']) {
      for (const callers of [1, 8]) {
        const us = { old: [], new: [] };
        for (let r = 0; r < ROUNDS; r++) {
          const order = r % 2 ? [['old', OLD], ['new', NEW]] : [['new', NEW], ['old', OLD]];
          for (const [name, module] of order) {
            const config =
              engine === 'sqlite'
                ? { dataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'bench-holds-')) }
                : { dataDir: os.tmpdir(), databaseUrl: await pg.createDatabase(`bench_holds_${process.pid}_${++n}`), databasePoolSize: 10 };
            us[name].push(await round(module, config, callers));
            if (engine === 'sqlite') fs.rmSync(config.dataDir, { recursive: true, force: true });
          }
        }
        const ratios = us.new.map((v, i) => v / us.old[i]).sort((a, b) => a - b);
        console.log(
          `${engine}, ${callers} caller(s): µs per reserve + settle, median old ${median(us.old).toFixed(0)}, new ${median(us.new).toFixed(0)}; ` +
            `new/old per round: median ${median(ratios).toFixed(2)}, range ${ratios[0].toFixed(2)}–${ratios[ratios.length - 1].toFixed(2)}`,
        );
      }
    }
  } finally {
    await pg.stop();
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
