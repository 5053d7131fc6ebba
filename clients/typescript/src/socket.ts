// One WebSocket interface over the two kinds of implementation a client may have:
//   - the `ws` package (Node; any version 8): sends the key in the Authorization header of the upgrade, and reads the
//     HTTP answer of a refused upgrade, so a refusal becomes the same typed error as for /denoise;
//   - a WHATWG WebSocket (browsers, Node 22+, Deno, Bun; Node 20 behind --experimental-websocket): cannot set headers,
//     so it connects with a single-use ticket, and a refused upgrade shows only as a failed connection.
import { errorFromResponse, NsmError } from './errors.js';

export interface SocketHandlers {
  open(): void;
  text(data: string): void;
  binary(data: Uint8Array): void;
  close(code: number, reason: string): void;
  /** The upgrade was refused (ws only) or the connection failed. */
  failed(err: NsmError): void;
}

export interface Socket {
  send(data: Uint8Array | string): void;
  close(code?: number, reason?: string): void;
  readonly bufferedAmount: number;
}

/** A WebSocket constructor: the `ws` package's class or a WHATWG one. */
export type WebSocketConstructor = new (url: string, ...rest: any[]) => any;

/** Whether a constructor is `ws`'s (Node EventEmitter API, accepts headers) rather than a WHATWG WebSocket. */
export function isWsPackage(Ctor: WebSocketConstructor): boolean {
  return typeof (Ctor as any).prototype?.on === 'function';
}

/** The `ws` package when it can be imported (an optional peer dependency), else null. */
export async function importWs(): Promise<WebSocketConstructor | null> {
  const name = 'ws'; // a variable, so that browser bundlers do not try to resolve it
  try {
    const mod: any = await import(/* webpackIgnore: true */ /* @vite-ignore */ name);
    return (mod.WebSocket ?? mod.default) as WebSocketConstructor;
  } catch {
    return null;
  }
}

function toBytes(data: unknown): Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (Array.isArray(data)) {
    // ws's 'fragments' binary type
    const total = data.reduce((n: number, b: Uint8Array) => n + b.length, 0);
    const out = new Uint8Array(total);
    let off = 0;
    for (const b of data as Uint8Array[]) {
      out.set(b, off);
      off += b.length;
    }
    return out;
  }
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError('unexpected WebSocket message data');
}

function connectWsPackage(Ctor: WebSocketConstructor, url: string, headers: Record<string, string>, h: SocketHandlers): Socket {
  const ws = new Ctor(url, { headers, perMessageDeflate: false });
  let refused = false;
  ws.on('unexpected-response', (_req: unknown, res: any) => {
    refused = true;
    const chunks: Uint8Array[] = [];
    res.on('data', (c: Uint8Array) => chunks.push(c));
    res.on('error', () => undefined);
    res.on('end', () => {
      const text = new TextDecoder().decode(toBytes(chunks));
      const get = (name: string): string | null => {
        const v = res.headers[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? v.join(', ') : String(v);
      };
      h.failed(errorFromResponse(res.statusCode ?? 0, { get }, text));
      ws.terminate?.();
    });
  });
  ws.on('open', () => h.open());
  ws.on('message', (data: unknown, isBinary: boolean) => {
    if (isBinary) h.binary(toBytes(data));
    else h.text(new TextDecoder().decode(toBytes(data)));
  });
  ws.on('error', (err: Error) => {
    if (!refused) h.failed(new NsmError({ type: 'connection_failed', message: err.message }));
  });
  ws.on('close', (code: number, reason: Uint8Array) => {
    if (!refused) h.close(code, new TextDecoder().decode(toBytes(reason ?? new Uint8Array())));
  });
  return {
    send: (data) => ws.send(data),
    close: (code, reason) => ws.close(code, reason),
    get bufferedAmount() {
      return ws.bufferedAmount as number;
    },
  };
}

function connectWhatwg(Ctor: WebSocketConstructor, url: string, h: SocketHandlers): Socket {
  const ws = new Ctor(url);
  ws.binaryType = 'arraybuffer';
  let opened = false;
  ws.addEventListener('open', () => {
    opened = true;
    h.open();
  });
  ws.addEventListener('message', (ev: { data: unknown }) => {
    if (typeof ev.data === 'string') h.text(ev.data);
    else h.binary(toBytes(ev.data));
  });
  ws.addEventListener('close', (ev: { code: number; reason: string }) => {
    if (opened) h.close(ev.code, ev.reason);
    else
      h.failed(new NsmError({
        type: 'connection_failed',
        message: `the stream could not be opened (close ${ev.code}); a browser WebSocket does not show the server's HTTP answer: ` +
          'check the key, its scope, credits and concurrent streams, or open the stream from Node to see the reason',
        closeCode: ev.code,
      }));
  });
  return {
    send: (data) => ws.send(data),
    close: (code, reason) => ws.close(code, reason),
    get bufferedAmount() {
      return ws.bufferedAmount as number;
    },
  };
}

export function connect(Ctor: WebSocketConstructor, url: string, headers: Record<string, string>, h: SocketHandlers): Socket {
  return isWsPackage(Ctor) ? connectWsPackage(Ctor, url, headers, h) : connectWhatwg(Ctor, url, h);
}
