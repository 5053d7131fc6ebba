// A free TCP port on 127.0.0.1, for the servers that tests, the bench and the manual checks start as child processes
// (they are told a port; it is free here and released just before the child binds it).
// Picked below the kernel's ephemeral range: a port the kernel hands out (port 0) is also what it gives outgoing
// connections as their local port, so between the release and the child's bind a client connecting to PostgreSQL or
// Redis could take it (a CI run failed with EADDRINUSE that way). Below the range only another freePort could collide.
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

export async function freePort(): Promise<number> {
  const low = 10_000;
  const high = ephemeralLow() - 1;
  for (let i = 0; i < 50; i++) {
    const got = await tryPort(low + Math.floor(Math.random() * (high - low + 1)));
    if (got !== null) return got;
  }
  const any = await tryPort(0);
  if (any === null) throw new Error('no free TCP port on 127.0.0.1');
  return any;
}
