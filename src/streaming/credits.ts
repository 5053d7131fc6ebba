// A stream's credits: 1 per started minute of stream audio, held ahead so a stream never runs on credits it does not
// have, and settled exactly at close. Each minute is its own 1-credit hold in the store (the same holds /denoise
// uses, renewed while the stream lives, reclaimed if this process dies); the next minute's hold is taken while the
// current one is still running, so audio never waits for it unless credits are short.
import type { Logger } from '../logging';
import type { CreditReservation, GatewayStore } from '../store/gateway/types';

/** Take the next minute's hold this many seconds before the current minute is used up. */
const AHEAD_S = 15;
/** After an early hold failed, the next try waits this long (not one store call per message while credits are short). */
const RETRY_AHEAD_MS = 1_000;

export type HoldResult = { ok: true } | { ok: false; exhausted: boolean; used: number; limit: number };

export class StreamCredits {
  private readonly holds: CreditReservation[] = [];
  private pending: Promise<HoldResult> | null = null;
  private readonly renewTimer: NodeJS.Timeout;
  private ended = false;
  private settled: Promise<number> | null = null;
  private aheadFailedAt = -Infinity;

  constructor(
    private readonly store: GatewayStore,
    private readonly workspaceId: string,
    private readonly limit: number,
    private readonly ttlMs: number,
    private readonly now: () => number,
    private readonly logger: Logger,
  ) {
    this.renewTimer = setInterval(() => this.renew(), Math.max(250, Math.floor(ttlMs / 3)));
    this.renewTimer.unref();
  }

  /** Minutes held so far. */
  get minutes(): number {
    return this.holds.length;
  }

  /** Holds one more minute (the first one before the upgrade). */
  hold(): Promise<HoldResult> {
    if (this.pending) return this.pending;
    this.pending = (async (): Promise<HoldResult> => {
      const when = new Date(this.now());
      const r = await this.store.reserveCredits(this.workspaceId, 1, this.limit, when, this.ttlMs);
      // Used up counts this stream's own holds (they will be settled): only other calls' holds may still come back.
      if (!r.ok || !r.reservation) return { ok: false, exhausted: r.used + this.holds.length + 1 > r.limit, used: r.used, limit: r.limit };
      if (this.ended) {
        await this.store.releaseReservation(r.reservation);
        return { ok: true };
      }
      this.holds.push(r.reservation);
      return { ok: true };
    })().finally(() => {
      this.pending = null;
    });
    return this.pending;
  }

  /**
   * Whether audio up to `seconds` is covered. Starts the next hold early (AHEAD_S); returns a promise only when the
   * audio would run past what is held, and the caller must wait for it.
   */
  cover(seconds: number): Promise<HoldResult> | null {
    const held = this.holds.length * 60;
    if (seconds > held) return this.hold();
    if (seconds > held - AHEAD_S && !this.pending && this.now() - this.aheadFailedAt >= RETRY_AHEAD_MS) {
      this.hold().then(
        (r) => {
          if (!r.ok) this.aheadFailedAt = this.now();
        },
        () => (this.aheadFailedAt = this.now()),
      );
    }
    return null;
  }

  /** Settles one credit per started minute of `seconds`, releases the rest; returns the credits charged. Once only. */
  settle(seconds: number): Promise<number> {
    this.settled ??= this.settleOnce(seconds);
    return this.settled;
  }

  private async settleOnce(seconds: number): Promise<number> {
    this.ended = true;
    clearInterval(this.renewTimer);
    await this.pending?.catch(() => undefined);
    const charge = Math.min(this.holds.length, Math.ceil(seconds / 60 - 1e-9));
    let charged = 0;
    for (let i = 0; i < this.holds.length; i++) {
      const r = this.holds[i];
      try {
        if (i < charge) {
          await this.store.settleReservation(r);
          charged++;
        } else {
          await this.store.releaseReservation(r);
        }
      } catch (err) {
        // The hold expires and is reclaimed: that minute then costs nothing.
        this.logger.error({ err }, 'could not settle or release a stream credit hold');
      }
    }
    this.holds.length = 0;
    return charged;
  }

  private renew(): void {
    const until = new Date(this.now() + this.ttlMs);
    for (const r of this.holds) {
      this.store.renewReservation(r, until).catch((err: unknown) => {
        this.logger.error({ err }, 'could not renew a stream credit hold');
      });
    }
  }
}
