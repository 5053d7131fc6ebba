// A free TCP port on 127.0.0.1, for the servers that tests, the bench and the manual checks start as child processes
// (they are told a port; the kernel picks one here, which is released just before the child binds it).
import net from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
