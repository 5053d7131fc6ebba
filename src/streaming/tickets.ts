// Stream tickets for browsers, which cannot set headers on a WebSocket: POST /stream/tickets (authenticated with the
// key) returns a random ticket, usable once within TICKET_TTL_MS as ?ticket= on the upgrade, standing for that key.
// Held in process memory: a ticket is redeemed on the replica that issued it unless the balancer keeps a client on
// one replica (docs/streaming.md, "Scale-out").
import crypto from 'node:crypto';

export const TICKET_TTL_MS = 60_000;
const TICKET_PATTERN = /^tk_[A-Za-z0-9_-]{32}$/;

export class TicketBook {
  private readonly tickets = new Map<string, { tokenId: string; expiresAt: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  issue(tokenId: string): { ticket: string; expiresAt: number } {
    this.sweep();
    const ticket = 'tk_' + crypto.randomBytes(24).toString('base64url');
    const expiresAt = this.now() + TICKET_TTL_MS;
    this.tickets.set(ticket, { tokenId, expiresAt });
    return { ticket, expiresAt };
  }

  /** The key a ticket stands for, once: a second redemption, an expired or unknown ticket gives null. */
  redeem(ticket: string): string | null {
    if (!TICKET_PATTERN.test(ticket)) return null;
    const entry = this.tickets.get(ticket);
    if (!entry) return null;
    this.tickets.delete(ticket);
    return entry.expiresAt > this.now() ? entry.tokenId : null;
  }

  private sweep(): void {
    const t = this.now();
    for (const [k, v] of this.tickets) if (v.expiresAt <= t) this.tickets.delete(k);
  }
}
