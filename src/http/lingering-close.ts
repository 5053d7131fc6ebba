// Lingering close: an answer sent before the request body was read (401, 413, 429 too_many_jobs, ...) on a connection
// that is to close must still reach a client that is busy sending that body. Node closes such a socket as soon as the
// answer is written; the client's next bytes then meet a closed socket, the kernel answers them with a reset, and a
// client that reads only after sending (Python's urllib, most simple clients) sees "broken pipe" instead of the answer
// (1.4 % of 1,000 refused uploads from the Python client here). As nginx's lingering_close does: half-close instead,
// keep reading (and discarding) what still comes, and close when the client has finished or after a bounded time.
import type http from 'node:http';
import type { Socket } from 'node:net';

export interface LingerOptions {
  /** The longest a finished connection is kept reading after its answer. */
  maxMs: number;
}

/** nginx's lingering_time default: enough for a client on a slow line to finish sending a refused upload. */
export const DEFAULT_LINGER: LingerOptions = { maxMs: 30_000 };

/** Every connection `server` accepts from now on half-closes and drains instead of closing at once after its last answer. */
export function lingerBeforeClose(server: http.Server, options: LingerOptions = DEFAULT_LINGER): void {
  server.on('connection', (socket: Socket) => {
    // Node's HTTP server ends a connection whose last answer is written through destroySoon (and only there); Node's
    // own (end, then destroy once written) still closes it, only later.
    const closeNow = socket.destroySoon;
    socket.destroySoon = function lingeringDestroySoon(this: Socket): void {
      if (this.destroyed) return;
      if (this.readableEnded || !this.readable) {
        closeNow.call(this);
        return;
      }
      // The body's remaining bytes still go through the HTTP parser, which discards them for a request whose answer
      // is done; the client's end of the stream (or the clock) closes the socket.
      const timer = setTimeout(() => this.destroy(), options.maxMs);
      timer.unref();
      this.once('close', () => clearTimeout(timer));
      this.once('end', () => closeNow.call(this));
      if (this.writable) this.end();
      this.resume();
    };
  });
}
