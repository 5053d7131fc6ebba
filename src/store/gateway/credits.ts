// Credits of the gateway store: the conditional charge, and holds (reservations) of calls in flight. The check and
// the change are one conditional upsert (`used + reserved + amount <= limit`, tested by the statement that adds, on
// the row it locks), so however many threads, processes or PostgreSQL replicas charge at once, credits are never
// overspent; a hold's row and its count change in one transaction. test/integration/store-credit-race.test.ts shows that this
// needs no synchronous transaction on SQLite (src/db/sqlite.ts runs one process's transactions on a file in turn),
// and what goes wrong when the check is a statement of its own.
import type { Sql, SqlDatabase } from '../../db/dialect';
import { newReservationId } from './common';
import { writePendingCharge } from './credit-outbox';
import { creditPeriod, type CreditReservation, type GatewayStore, type PendingCharge } from './types';

type Credits = Pick<
  GatewayStore,
  | 'chargeCredits'
  | 'refundCredits'
  | 'creditsUsed'
  | 'reserveCredits'
  | 'renewReservation'
  | 'settleReservation'
  | 'releaseReservation'
  | 'reclaimExpiredReservations'
  | 'creditsHeld'
>;

export function credits(db: SqlDatabase): Credits {
  const d = db.dialect;
  const amount = d.cast('amount', 'bigint');
  const limit = d.cast('limit', 'bigint');
  // Inserts the period's row, or adds to it, only while the sum stays within the limit; no row back when it would not.
  const CHARGE = `INSERT INTO credit_usage AS c (workspace_id, period, used, reserved)
      SELECT @workspaceId, @period, ${amount}, 0 WHERE ${amount} <= ${limit}
    ON CONFLICT (workspace_id, period)
      DO UPDATE SET used = c.used + excluded.used WHERE c.used + c.reserved + excluded.used <= ${limit}
    RETURNING used`;
  const HOLD = `INSERT INTO credit_usage AS c (workspace_id, period, used, reserved)
      SELECT @workspaceId, @period, 0, ${amount} WHERE ${amount} <= ${limit}
    ON CONFLICT (workspace_id, period)
      DO UPDATE SET reserved = c.reserved + excluded.reserved WHERE c.used + c.reserved + excluded.reserved <= ${limit}
    RETURNING used, reserved`;
  const LESS_RESERVED = `UPDATE credit_usage SET reserved = ${d.greatest('reserved - @amount', '0')}
    WHERE workspace_id = @workspaceId AND period = @period`;

  async function usage(workspaceId: string, period: string): Promise<{ used: number; reserved: number }> {
    const [row] = await db.all('SELECT used, reserved FROM credit_usage WHERE workspace_id = @workspaceId AND period = @period', {
      workspaceId,
      period,
    });
    return { used: Number(row?.used ?? 0), reserved: Number(row?.reserved ?? 0) };
  }

  /**
   * Gives back expired reservations (of one workspace, or all). On PostgreSQL the rows are taken with SKIP LOCKED, so
   * two reclaimers, or a reclaimer and a settling gateway, never wait on each other or take the same row twice.
   */
  function reclaim(workspaceId: string | null, now: Date): Promise<number> {
    return db.transaction(async (tx) => {
      const gone = await tx.all(
        `DELETE FROM credit_reservations WHERE id IN (
           SELECT id FROM credit_reservations WHERE expires_at <= @now${workspaceId === null ? '' : ' AND workspace_id = @workspaceId'}
           ${d.skipLocked()})
         RETURNING workspace_id, period, amount`,
        { now: d.time(now.getTime()), workspaceId },
      );
      const sums = new Map<string, { workspaceId: string; period: string; amount: number }>();
      for (const r of gone) {
        const key = `${r.workspace_id as string} ${r.period as string}`;
        const sum = sums.get(key) ?? { workspaceId: r.workspace_id as string, period: r.period as string, amount: 0 };
        sum.amount += Number(r.amount);
        sums.set(key, sum);
      }
      for (const sum of sums.values()) await tx.run(LESS_RESERVED, sum);
      return gone.length;
    });
  }

  /**
   * Ends a reservation: deleting its row is what makes it end once. Its credits leave `reserved` and, when `settle`,
   * join `used`, by one statement on the period's row (the row every call of the workspace writes: its lock is held
   * from that statement to the commit only).
   */
  function end(r: CreditReservation, settle: boolean, pending?: PendingCharge): Promise<void> {
    return db.transaction(async (tx: Sql) => {
      const [gone] = await tx.all('DELETE FROM credit_reservations WHERE id = @id RETURNING amount', { id: r.id });
      // Reclaimed already (its gateway stalled past the expiry) yet delivered: the work was done, so it is charged.
      if (!gone && !settle) return;
      if (settle && pending) await writePendingCharge(tx, pending, r.workspaceId, r.period, r.amount);
      await tx.run(
        `INSERT INTO credit_usage AS c (workspace_id, period, used, reserved) VALUES (@workspaceId, @period, @used, 0)
         ON CONFLICT (workspace_id, period)
           DO UPDATE SET used = c.used + excluded.used, reserved = ${d.greatest('c.reserved - @held', '0')}`,
        { workspaceId: r.workspaceId, period: r.period, used: settle ? r.amount : 0, held: gone ? Number(gone.amount) : 0 },
      );
    });
  }

  const store: Credits = {
    async chargeCredits(workspaceId, amount, limit, when) {
      const period = creditPeriod(when);
      if (amount <= 0) return { ok: true, used: await store.creditsUsed(workspaceId, when), limit };
      const [row] = await db.all(CHARGE, { workspaceId, period, amount, limit });
      if (row) return { ok: true, used: Number(row.used), limit };
      return { ok: false, used: (await usage(workspaceId, period)).used, limit };
    },
    async refundCredits(workspaceId, amount, when) {
      if (amount <= 0) return;
      await db.run(`UPDATE credit_usage SET used = ${d.greatest('used - @amount', '0')} WHERE workspace_id = @workspaceId AND period = @period`, {
        amount,
        workspaceId,
        period: creditPeriod(when),
      });
    },
    async creditsUsed(workspaceId, when) {
      return (await usage(workspaceId, creditPeriod(when))).used;
    },

    async reserveCredits(workspaceId, amount, limit, when, ttlMs) {
      if (!Number.isInteger(amount) || amount <= 0) throw new Error(`amount must be a positive integer, got ${amount}`);
      const period = creditPeriod(when);
      const id = newReservationId();
      // The hold's row first, the period's row (locked until the commit) last; no room: the hold's row goes again.
      const attempt = () =>
        db.transaction(async (tx) => {
          await tx.run(
            'INSERT INTO credit_reservations (id, workspace_id, period, amount, expires_at) VALUES (@id, @workspaceId, @period, @amount, @expiresAt)',
            { id, workspaceId, period, amount, expiresAt: d.time(when.getTime() + ttlMs) },
          );
          const [held] = await tx.all(HOLD, { workspaceId, period, amount, limit });
          if (held) return { used: Number(held.used), reserved: Number(held.reserved) };
          await tx.run('DELETE FROM credit_reservations WHERE id = @id', { id });
          return null;
        });
      let held = await attempt();
      // Full: first give back what dead gateways still hold (expired reservations), then try once more.
      if (!held && (await reclaim(workspaceId, when)) > 0) held = await attempt();
      if (held) return { ok: true, ...held, limit, reservation: { id, workspaceId, period, amount } };
      return { ok: false, ...(await usage(workspaceId, period)), limit, reservation: null };
    },
    async renewReservation(reservation, expiresAt) {
      const changed = await db.run('UPDATE credit_reservations SET expires_at = @expiresAt WHERE id = @id', {
        id: reservation.id,
        expiresAt: d.time(expiresAt.getTime()),
      });
      return changed === 1;
    },
    async settleReservation(reservation, pending) {
      await end(reservation, true, pending);
    },
    async releaseReservation(reservation) {
      await end(reservation, false);
    },
    async reclaimExpiredReservations(now) {
      return reclaim(null, now);
    },
    async creditsHeld(workspaceId, when) {
      return (await usage(workspaceId, creditPeriod(when))).reserved;
    },
  };
  return store;
}
