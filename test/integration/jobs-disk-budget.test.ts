// The disk budget's arithmetic (src/storage/disk-budget.ts) on a controlled clock and free-space reading: declared
// reservations, chunked takes, writers seeing each other, release, and the statfs refresh not forgetting bytes.
import { DiskBudget, REFRESH_MS } from '../../src/storage/disk-budget';

describe('DiskBudget', () => {
  let free: number;
  let clock: number;
  let reads: number;
  const budget = (floor: number) =>
    new DiskBudget(
      async () => {
        reads++;
        return free;
      },
      floor,
      () => clock,
    );

  beforeEach(() => {
    free = 1000;
    clock = 0;
    reads = 0;
  });

  test('a declared upload reserves its size; others see the reservation; a chunked writer stops at the floor', async () => {
    const b = budget(100);
    expect(await b.headroom()).toBe(900);
    const declared = (await b.open(600))!;
    expect(declared).not.toBeNull();
    expect(await b.open(400)).toBeNull(); // 300 left beside the reservation
    const chunked = (await b.open())!;
    expect(await chunked.take(200)).toBe(true);
    expect(await chunked.take(200)).toBe(false); // 100 left
    expect(await chunked.take(100)).toBe(true); // exactly at the floor
    expect(await b.open()).toBeNull();
    // The declared writer's bytes come from its reservation, whatever the others took.
    expect(await declared.take(600)).toBe(true);
    // Beyond its declared size (a lying Content-Length) it is a chunked writer like the others.
    expect(await declared.take(1)).toBe(false);
  });

  test('declared uploads opening at the same moment see each other', async () => {
    const b = budget(100);
    const claims = await Promise.all([b.open(600), b.open(600), b.open(600)]);
    expect(claims.filter(Boolean).length).toBe(1);
  });

  test('release gives back what was reserved and not written', async () => {
    const b = budget(0);
    const a = (await b.open(800))!;
    expect(await a.take(300)).toBe(true);
    expect(await b.headroom()).toBe(200);
    a.release();
    a.release();
    expect(await b.headroom()).toBe(700);
    expect(await a.take(1)).toBe(false);
  });

  test('a statfs reading replaces the bytes counted before it, and is taken at most every REFRESH_MS', async () => {
    const b = budget(0);
    const w = (await b.open())!;
    expect(await w.take(400)).toBe(true);
    expect(reads).toBe(1);
    expect(await b.headroom()).toBe(600);
    // The disk now shows the 400 bytes (and someone else freed 100): the next reading says so.
    free = 700;
    clock += REFRESH_MS;
    expect(await b.headroom()).toBe(700);
    expect(reads).toBe(2);
    expect(await w.take(700)).toBe(true);
    expect(await w.take(1)).toBe(false);
  });
});
