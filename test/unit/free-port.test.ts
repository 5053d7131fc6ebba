// scripts/lib/free-port.ts: the ports tests give their child servers. Two jest workers never draw from the same part
// of the range, and one process never gets the same port twice (a port released for a child that has not bound it
// yet looks free again: a CI run's gateway failed with EADDRINUSE so).
import { freePort, portRange } from '../../scripts/lib/free-port';

test('jest workers have disjoint slices below the ephemeral range', () => {
  const slices = [1, 2, 3, 4].map((w) => portRange(w));
  for (let i = 1; i < slices.length; i++) expect(slices[i][0]).toBeGreaterThan(slices[i - 1][1]);
  expect(slices[0][0]).toBeGreaterThanOrEqual(10_000);
  expect(slices[0][1] - slices[0][0]).toBeGreaterThan(1000);
  const [, whole] = portRange(NaN);
  expect(slices[3][1]).toBeLessThanOrEqual(whole);
});

test('this worker draws 300 distinct ports, all from its own slice', async () => {
  const [low, high] = portRange();
  const ports: number[] = [];
  for (let i = 0; i < 300; i++) ports.push(await freePort());
  expect(new Set(ports).size).toBe(ports.length);
  for (const p of ports) {
    expect(p).toBeGreaterThanOrEqual(low);
    expect(p).toBeLessThanOrEqual(high);
  }
});
