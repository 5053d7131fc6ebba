// Lingering close (src/http/lingering-close.ts) on a real Node HTTP server and a raw TCP client: an answer given
// before the body was read, on a connection that closes after it, still lets the client finish sending; without it the
// client's writes after the answer are reset (what the Python client saw as "broken pipe" on 429 too_many_jobs).
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { lingerBeforeClose } from '../../src/http/lingering-close';

const CHUNK = Buffer.alloc(64 * 1024, 7);
const CHUNKS = 24;

interface Outcome {
  answer: string;
  writeError: string | null;
  serverEnded: boolean;
  closedAfterMs: number;
}

let servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  servers = [];
});

/** A server that refuses every request at once (401), its body unread, as the gateway's early refusals do. */
async function refusingServer(linger: { maxMs: number } | null): Promise<number> {
  const server = http.createServer((_req, res) => {
    res.statusCode = 401;
    res.end('{"error":{"type":"invalid_token"}}');
  });
  if (linger) lingerBeforeClose(server, linger);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

/** Sends the headers, waits for the whole answer, then sends the body's CHUNKS every 10 ms (or forever). */
function upload(port: number, opts: { forever?: boolean } = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }); // keeps sending after the server's FIN
    let answer = '';
    let writeError: string | null = null;
    let serverEnded = false;
    let answeredAt = 0;
    let sending: NodeJS.Timeout | undefined;
    socket.write(`POST /upload HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${opts.forever ? 1e12 : CHUNK.length * CHUNKS}\r\n\r\n`);
    socket.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
      if (answeredAt || !answer.includes('invalid_token')) return;
      answeredAt = Date.now();
      let sent = 0;
      sending = setInterval(() => {
        if (!opts.forever && sent === CHUNKS) {
          clearInterval(sending);
          socket.end();
          return;
        }
        sent++;
        socket.write(CHUNK, (err) => {
          if (err && !writeError) writeError = (err as NodeJS.ErrnoException).code ?? err.message;
        });
      }, 10);
    });
    socket.on('end', () => {
      serverEnded = true;
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (!writeError) writeError = err.code ?? err.message;
    });
    socket.on('close', () => {
      clearInterval(sending);
      resolve({ answer, writeError, serverEnded, closedAfterMs: Date.now() - answeredAt });
    });
  });
}

test('with it: the whole body is sent after the answer without an error, and the server closes once the client has', async () => {
  const r = await upload(await refusingServer({ maxMs: 10_000 }));
  expect(r.answer).toMatch(/^HTTP\/1\.1 401 /);
  expect(r.answer).toMatch(/Connection: close/i);
  expect(r.writeError).toBeNull();
  expect(r.serverEnded).toBe(true);
  expect(r.closedAfterMs).toBeLessThan(5_000); // the client's end closed it, not the 10 s clock
});

test('with it: a client that never stops sending is cut after maxMs', async () => {
  const r = await upload(await refusingServer({ maxMs: 400 }), { forever: true });
  expect(r.answer).toMatch(/^HTTP\/1\.1 401 /);
  expect(r.closedAfterMs).toBeGreaterThanOrEqual(350);
  expect(r.closedAfterMs).toBeLessThan(5_000);
});

test('without it (Node alone): the writes after the answer are reset', async () => {
  const r = await upload(await refusingServer(null));
  expect(r.answer).toMatch(/^HTTP\/1\.1 401 /);
  expect(r.writeError).toMatch(/EPIPE|ECONNRESET/);
});
