// One close stack for what a process opens (createApp, and each model-service placement): closes run newest first.

/**
 * What createApp opened, as one stack: `defer` each close as its part opens; `closeAll` runs them newest first (as
 * Fastify runs onClose hooks), every one even when an earlier one throws, then rethrows the first error.
 */
export class Closer {
  private readonly steps: Array<() => unknown> = [];

  defer(close: () => unknown): void {
    this.steps.push(close);
  }

  /** Runs one opening step; when it throws, what was opened before it is closed and its error rethrown. */
  async open<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      await this.closeAll().catch(() => undefined);
      throw err;
    }
  }

  async closeAll(): Promise<void> {
    const errors: unknown[] = [];
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      try {
        await step();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length > 0) throw errors[0];
  }
}
