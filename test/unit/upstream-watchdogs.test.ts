// ProgressWatch.follow: a stream held back by its own pipe (the destination is full: a stalled disk write) is not a
// slow sender; a stream that flows and gets nothing is. Fake timers for the watch's clock, real streams.
import { PassThrough, Writable } from 'node:stream';
import { ProgressWatch } from '../../src/upstream/watchdogs';

const WINDOW_MS = 1000;
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('ProgressWatch.follow', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] }));
  afterEach(() => jest.useRealTimers());

  test('no stall while the pipe holds the stream back; a stall once it flows and nothing comes', async () => {
    const source = new PassThrough({ highWaterMark: 1024 });
    const held: Array<() => void> = [];
    const dest = new Writable({ highWaterMark: 1024, write: (_chunk, _enc, done) => void held.push(done) });
    let stalls = 0;
    const watch = new ProgressWatch(WINDOW_MS, 1, () => stalls++);
    const detach = watch.follow(source);
    source.pipe(dest);
    // The sender writes far more than the buffers hold; the destination never finishes a write: the pipe pauses.
    for (let i = 0; i < 16; i++) source.write(Buffer.alloc(4096, i));
    await turn();
    expect(source.isPaused()).toBe(true);
    for (let i = 0; i < 10; i++) {
      jest.advanceTimersByTime(WINDOW_MS);
      await turn();
    }
    expect(stalls).toBe(0);
    // The destination catches up; everything buffered flows out, then the sender sends nothing more.
    while (held.length > 0) {
      held.shift()!();
      await turn();
    }
    expect(source.isPaused()).toBe(false);
    jest.advanceTimersByTime(WINDOW_MS);
    jest.advanceTimersByTime(WINDOW_MS);
    expect(stalls).toBe(1);
    detach();
  });

  test('a flowing stream with too few bytes in a window stalls; enough bytes keep it going', async () => {
    const source = new PassThrough();
    let stalls = 0;
    const watch = new ProgressWatch(WINDOW_MS, 100, () => stalls++);
    const detach = watch.follow(source);
    source.resume();
    await turn();
    source.write(Buffer.alloc(200));
    await turn();
    jest.advanceTimersByTime(WINDOW_MS);
    expect(stalls).toBe(0);
    source.write(Buffer.alloc(10));
    await turn();
    jest.advanceTimersByTime(WINDOW_MS);
    expect(stalls).toBe(1);
    detach();
  });
});
