// Policy 9 of 11, credits: holds (reserves) the route's credits before the call is forwarded, atomically across
// processes; they become used only when the model service delivers (see forward). 402 quota_exhausted only when
// SETTLED usage leaves no room; when holds of calls still in flight fill the rest, 429 rate_limited with a short
// Retry-After (they may be given back). Runs after declared-body-size, before forward; its settle phase gives back a
// hold still open when the pipeline ends (the call failed before it was forwarded: nothing was delivered).
import type { Logger } from '../../logging';
import type { CreditReservation, GatewayStore, PendingCharge } from '../../store/gateway/types';
import { reject, type AuthenticatedCall, type HeldCredits, type Policy } from '../call';
import type { GatewayContext } from '../types';

/** Retry-After of the 429 given while every remaining credit is held by calls still in flight. */
export const CREDITS_IN_FLIGHT_RETRY_AFTER_S = 2;

type HoldStore = Pick<GatewayStore, 'renewReservation' | 'settleReservation' | 'releaseReservation'>;

export interface CreditsOptions {
  store: Pick<GatewayStore, 'reserveCredits'> & HoldStore;
  /** How long a hold lives without renewal (config.creditReservationTtlMs); renewed every third of it. */
  ttlMs: number;
  now: () => number;
  logger: Logger;
}

/** One call's hold: renewed while the call runs, ended once (settled or released). */
class CreditHold implements HeldCredits {
  readonly amount: number;
  private reservation: CreditReservation | undefined;
  private readonly renewTimer: NodeJS.Timeout;

  constructor(
    reservation: CreditReservation,
    private readonly ctx: GatewayContext,
    private readonly deps: Pick<CreditsOptions, 'ttlMs' | 'now' | 'logger'> & { store: HoldStore },
  ) {
    this.reservation = reservation;
    this.amount = reservation.amount;
    const { store, ttlMs, now, logger } = deps;
    // A gateway that dies mid-call stops renewing: its hold expires and is reclaimed by the others.
    this.renewTimer = setInterval(() => {
      store.renewReservation(reservation, new Date(now() + ttlMs)).catch((err: unknown) => {
        logger.error({ err, request_id: ctx.requestId }, 'could not renew the credit hold of a call');
      });
    }, Math.max(250, Math.floor(ttlMs / 3)));
    this.renewTimer.unref();
  }

  /** Ends the hold: charged when the model service delivered, given back otherwise. */
  async end(delivered: boolean, pending?: PendingCharge): Promise<boolean> {
    const reservation = this.reservation;
    if (!reservation) return false;
    this.reservation = undefined;
    clearInterval(this.renewTimer);
    try {
      if (delivered) {
        await this.deps.store.settleReservation(reservation, pending);
        this.ctx.creditsCharged = reservation.amount;
      } else {
        await this.deps.store.releaseReservation(reservation);
      }
      return true;
    } catch (err) {
      // The hold stays until it expires and is reclaimed (the call then costs nothing); the response is already out.
      this.deps.logger.error(
        { err, request_id: this.ctx.requestId },
        `could not ${delivered ? 'settle' : 'release'} the credits of a call`,
      );
      return false;
    }
  }
}

export function creditsPolicy(options: CreditsOptions): Policy<AuthenticatedCall> {
  const { store, ttlMs, now } = options;
  return {
    name: 'credits',
    async run(call) {
      const { route } = call;
      if (route.credits <= 0) return 'continue';
      const when = new Date(now());
      const held = await store.reserveCredits(call.workspace.id, route.credits, call.limits.creditsPerMonth, when, ttlMs);
      if (!held.ok || !held.reservation) {
        if (held.used + route.credits > held.limit) {
          return reject(
            call,
            'quota_exhausted',
            `The workspace has used ${held.used} of its ${held.limit} credits this month; credits renew on the 1st (UTC) or with a plan upgrade.`,
          );
        }
        call.res.setHeader('Retry-After', String(CREDITS_IN_FLIGHT_RETRY_AFTER_S));
        return reject(
          call,
          'rate_limited',
          `The workspace's remaining ${held.limit - held.used} credits are held by calls in flight; retry in ${CREDITS_IN_FLIGHT_RETRY_AFTER_S} s.`,
        );
      }
      const hold = new CreditHold(held.reservation, call.ctx, options);
      call.credits = hold;
      // Handlers that keep the credit past the response (a job, refunded if it later fails) need the amount and the
      // credit period the hold was taken in.
      call.ctx.creditsHeld = hold.amount;
      call.ctx.chargedAt = when;
      call.ctx.settleCredits = (pending) => hold.end(true, pending);
      return 'continue';
    },
    async settle(call) {
      await call.credits?.end(false);
    },
  };
}
