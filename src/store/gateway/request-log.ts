// The request log of the gateway store: one row per call, or one row per aggregate key (refusals of one key in one
// minute, counted in `calls`; the upsert is atomic, also across gateways on PostgreSQL), the console's filtered pages,
// counts and per-day series that add the rows' calls up, and retention pruning in batches.
import type { SqlDatabase } from '../../db/dialect';
import { fillDays, pageOf, seriesStart } from './common';
import { toLogEntry, whereClause } from './rows';
import type { GatewayStore } from './types';

type RequestLog = Pick<GatewayStore, 'logRequest' | 'queryRequests' | 'countRequests' | 'pruneRequests' | 'requestsPerDay'>;

// A new row, or, for an aggregate key already present, one more call on that row (its bytes added).
const INSERT = `INSERT INTO request_log (request_id, client_request_id, time, token_id, workspace_id, method, service,
    endpoint, status, error_type, credits_charged, bytes_in, bytes_out, upstream_ms, total_ms, client_ip, error_message,
    calls, aggregate_key)
  VALUES (@requestId, @clientRequestId, @time, @tokenId, @workspaceId, @method, @service, @endpoint,
    @status, @errorType, @creditsCharged, @bytesIn, @bytesOut, @upstreamMs, @totalMs, @clientIp, @errorMessage,
    1, @aggregateKey)
  ON CONFLICT (aggregate_key) DO UPDATE SET calls = request_log.calls + 1,
    bytes_in = request_log.bytes_in + excluded.bytes_in, bytes_out = request_log.bytes_out + excluded.bytes_out,
    credits_charged = request_log.credits_charged + excluded.credits_charged`;

export function requestLog(db: SqlDatabase): RequestLog {
  const d = db.dialect;
  return {
    async logRequest(e) {
      await db.run(INSERT, {
        requestId: e.requestId,
        clientRequestId: e.clientRequestId ?? null,
        time: e.time,
        tokenId: e.tokenId,
        workspaceId: e.workspaceId,
        method: e.method,
        service: e.service,
        endpoint: e.endpoint,
        status: e.status,
        errorType: e.errorType,
        creditsCharged: e.creditsCharged,
        bytesIn: e.bytesIn,
        bytesOut: e.bytesOut,
        upstreamMs: e.upstreamMs,
        totalMs: e.totalMs,
        clientIp: e.clientIp,
        errorMessage: e.errorMessage ?? null,
        aggregateKey: e.aggregateKey ?? null,
      });
    },
    async queryRequests(filter) {
      const { sql, params } = whereClause(filter);
      const rows = await db.all(`SELECT * FROM request_log ${sql} ORDER BY time DESC, id DESC LIMIT @limit OFFSET @offset`, {
        ...params,
        ...pageOf(filter),
      });
      return rows.map((r) => toLogEntry(d, r));
    },
    async countRequests(filter) {
      const { sql, params } = whereClause(filter);
      const [row] = await db.all(`SELECT COALESCE(SUM(calls), 0) AS n FROM request_log ${sql}`, params);
      return Number(row.n);
    },
    async pruneRequests(before, maxRows) {
      return db.run('DELETE FROM request_log WHERE id IN (SELECT id FROM request_log WHERE time < @before ORDER BY time LIMIT @max)', {
        before,
        max: Math.max(1, Math.trunc(maxRows)),
      });
    },
    async requestsPerDay(workspaceId, days) {
      const { start, n } = seriesStart(days);
      const rows = await db.all(
        `SELECT ${d.utcDay('time')} AS day, SUM(calls) AS count, SUM(CASE WHEN status >= 400 THEN calls ELSE 0 END) AS errors
         FROM request_log WHERE workspace_id = @workspaceId AND time >= @start GROUP BY day`,
        { workspaceId, start: start.toISOString() },
      );
      return fillDays(start, n, rows as Array<{ day: string; count: number; errors: number }>);
    },
  };
}
