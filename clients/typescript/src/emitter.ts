// A small event emitter that runs in Node and in browsers alike (Node's EventEmitter is not in browsers, EventTarget
// carries no payload without CustomEvent). Unlike Node's, an 'error' without a listener throws nothing: a stream's
// errors also reject its `done` promise.

type Listener = (...args: any[]) => void;

export class Emitter {
  private readonly listeners = new Map<string, Set<Listener>>();

  on(event: string, fn: Listener): this {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(fn);
    return this;
  }

  once(event: string, fn: Listener): this {
    const wrapper: Listener = (...args) => {
      this.off(event, wrapper);
      fn(...args);
    };
    return this.on(event, wrapper);
  }

  off(event: string, fn: Listener): this {
    this.listeners.get(event)?.delete(fn);
    return this;
  }

  listenerCount(event: string): number {
    return this.listeners.get(event)?.size ?? 0;
  }

  protected emit(event: string, ...args: unknown[]): void {
    for (const fn of [...(this.listeners.get(event) ?? [])]) {
      try {
        fn(...args);
      } catch (err) {
        // A listener's bug must not break the stream's own bookkeeping; surface it asynchronously.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}
