// The fuzz tests' driver: seeded clients, `concurrency` at a time, one after another until `ms` have passed or the
// server died. Each client gets a generator of its own seeded from the run's, so a seed replays the same clients.
import { seededRandom } from '../../src/audio/synthetic-noise';

export async function fuzzClients<T>(
  seed: number,
  opts: { ms: number; concurrency: number; alive: () => boolean },
  client: (rnd: () => number, label: string) => Promise<T>,
): Promise<T[]> {
  const rnd = seededRandom(seed);
  const outcomes: T[] = [];
  const until = Date.now() + opts.ms;
  let n = 0;
  await Promise.all(
    Array.from({ length: opts.concurrency }, async () => {
      // A dead server ends the run at once (the test then says so).
      while (Date.now() < until && opts.alive()) {
        const label = `client ${n++}`;
        outcomes.push(await client(seededRandom(Math.floor(rnd() * 2 ** 31)), label));
      }
    }),
  );
  return outcomes;
}

/** `pick(xs)`: one of `xs`, drawn with `rnd` (a client's own generator, so a seed replays its picks). */
export function picker(rnd: () => number): <T>(xs: readonly T[]) => T {
  return (xs) => xs[Math.floor(rnd() * xs.length)];
}
