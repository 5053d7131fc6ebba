// A free TCP port on 127.0.0.1, for the servers that tests, the bench and the manual checks start as child processes
// (they are told a port; it is free here and released just before the child binds it).
// Picked below the kernel's ephemeral range: a port the kernel hands out (port 0) is also what it gives outgoing
// connections as their local port, so between the release and the child's bind a client connecting to PostgreSQL or
// Redis could take it (a CI run failed with EADDRINUSE that way). Below the range only another freePort could collide,
// and that is ruled out too: each jest worker draws from its own slice of the range, and a process never hands out the
// same port twice (a CI run failed with EADDRINUSE when a gateway, still loading, had not yet bound its port).
import fs from 'node:fs';
import net from 'node:net';

function ephemeralLow(): number {
  try {
    const low = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 11_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

function tryPort(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(null));
    srv.listen(port, '127.0.0.1', () => {
      const got = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(got));
    });
  });
}

const SLICES = 8;
const handedOut = new Set<number>();

/** A process's part of [10000, ephemeral low): a slice per jest worker (JEST_WORKER_ID 1, 2, ...), else all of it. */
export function portRange(worker = Number(process.env.JEST_WORKER_ID)): [number, number] {
  const low = 10_000;
  const high = ephemeralLow() - 1;
  if (!Number.isInteger(worker) || worker < 1) return [low, high];
  const width = Math.floor((high - low + 1) / SLICES);
  const start = low + ((worker - 1) % SLICES) * width;
  return [start, start + width - 1];
}

export async function freePort(): Promise<number> {
  const [low, high] = portRange();
  for (let i = 0; i < 50; i++) {
    const pick = low + Math.floor(Math.random() * (high - low + 1));
    if (handedOut.has(pick)) continue;
    const got = await tryPort(pick);
    if (got !== null) {
      handedOut.add(got);
      return got;
    }
  }
  const any = await tryPort(0);
  if (any === null) throw new Error('no free TCP port on 127.0.0.1');
  return any;
}
