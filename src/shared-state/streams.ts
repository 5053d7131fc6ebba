// Live-stream state every gateway replica must see (docs/streaming.md): browser tickets for the WebSocket upgrade and
// each workspace's concurrent-stream slots. The contracts and their in-memory engines (one process: the single box);
// the Redis engines are in src/shared-state/redis/streams.ts, and the same contract tests run against both.
import crypto from 'node:crypto';

/** A ticket is good once, for this long. */
export const TICKET_TTL_MS = 60_000;
/** `tk_` and 24 random bytes in base64url (32 characters). */
export const TICKET_PATTERN = /^tk_[A-Za-z0-9_-]{32}$/;
/** A slot lease not renewed for this long is no longer counted (its gateway died or lost Redis). */
export const STREAM_LEASE_TTL_MS = 90_000;
/** How often a gateway renews the leases of its open streams: three tries before one lapses. */
export const STREAM_LEASE_RENEW_MS = 30_000;

export function newTicket(): string {
  return 'tk_' + crypto.randomBytes(24).toString('base64url');
}

/** Single-use tickets standing for a key: issued on any replica, redeemed once on any replica. */
export interface StreamTickets {
  issue(tokenId: string): Promise<{ ticket: string; expiresAt: number }>;
  /** The key a ticket stands for, once: a second redemption (on any replica), an expired or unknown ticket gives null. */
  redeem(ticket: string): Promise<string | null>;
}

export interface SlotLease {
  workspaceId: string;
  id: string;
}

/** The answer to an acquire: a lease, or null when `max` were held; `open` counts the live leases, the new one included. */
export interface SlotGrant {
  lease: SlotLease | null;
  open: number;
}

/**
 * Concurrent-stream slots per workspace, counted across replicas. A lease lasts `leaseTtlMs` unless renewed, so the
 * streams of a gateway that died stop counting by themselves.
 */
export interface StreamSlots {
  /** Takes a slot when fewer than `max` live leases are held for the workspace (atomic across replicas). */
  acquire(workspaceId: string, max: number): Promise<SlotGrant>;
  release(lease: SlotLease): Promise<void>;
  /** Pushes the expiry of these leases out by `leaseTtlMs`; a lease that already lapsed or was released stays gone. */
  renew(leases: SlotLease[]): Promise<void>;
}

export interface StreamStateOptions {
  /** Default: Date.now. */
  now?: () => number;
  /** Default TICKET_TTL_MS. */
  ticketTtlMs?: number;
  /** Default STREAM_LEASE_TTL_MS. */
  leaseTtlMs?: number;
}

export class MemoryStreamTickets implements StreamTickets {
  private readonly tickets = new Map<string, { tokenId: string; expiresAt: number }>();
  private readonly now: () => number;
  private readonly ttlMs: number;

  constructor(options: StreamStateOptions = {}) {
    this.now = options.now ?? Date.now;
    this.ttlMs = options.ticketTtlMs ?? TICKET_TTL_MS;
  }

  async issue(tokenId: string): Promise<{ ticket: string; expiresAt: number }> {
    this.sweep();
    const ticket = newTicket();
    const expiresAt = this.now() + this.ttlMs;
    this.tickets.set(ticket, { tokenId, expiresAt });
    return { ticket, expiresAt };
  }

  async redeem(ticket: string): Promise<string | null> {
    if (!TICKET_PATTERN.test(ticket)) return null;
    const entry = this.tickets.get(ticket);
    if (!entry) return null;
    this.tickets.delete(ticket);
    return entry.expiresAt > this.now() ? entry.tokenId : null;
  }

  /** Tickets held (tests). */
  get size(): number {
    return this.tickets.size;
  }

  private sweep(): void {
    const t = this.now();
    for (const [k, v] of this.tickets) if (v.expiresAt <= t) this.tickets.delete(k);
  }
}

export class MemoryStreamSlots implements StreamSlots {
  /** workspace → lease id → expiry. */
  private readonly leases = new Map<string, Map<string, number>>();
  private readonly now: () => number;
  private readonly ttlMs: number;

  constructor(options: StreamStateOptions = {}) {
    this.now = options.now ?? Date.now;
    this.ttlMs = options.leaseTtlMs ?? STREAM_LEASE_TTL_MS;
  }

  async acquire(workspaceId: string, max: number): Promise<SlotGrant> {
    const t = this.now();
    const held = this.leases.get(workspaceId) ?? new Map<string, number>();
    for (const [id, expiresAt] of held) if (expiresAt <= t) held.delete(id);
    if (held.size >= max) {
      this.store(workspaceId, held);
      return { lease: null, open: held.size };
    }
    const id = crypto.randomUUID();
    held.set(id, t + this.ttlMs);
    this.store(workspaceId, held);
    return { lease: { workspaceId, id }, open: held.size };
  }

  async release(lease: SlotLease): Promise<void> {
    const held = this.leases.get(lease.workspaceId);
    held?.delete(lease.id);
    if (held?.size === 0) this.leases.delete(lease.workspaceId);
  }

  async renew(leases: SlotLease[]): Promise<void> {
    const t = this.now();
    for (const lease of leases) {
      const held = this.leases.get(lease.workspaceId);
      const expiresAt = held?.get(lease.id);
      if (expiresAt !== undefined && expiresAt > t) held!.set(lease.id, t + this.ttlMs);
    }
  }

  private store(workspaceId: string, held: Map<string, number>): void {
    if (held.size > 0) this.leases.set(workspaceId, held);
    else this.leases.delete(workspaceId);
  }
}
