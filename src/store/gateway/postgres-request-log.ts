// The request log of the PostgreSQL store: one row per call, or one row per aggregate key (refusals of one key in one
// minute, counted in `calls`; the upsert is atomic across gateways), the console's filtered pages, counts and per-day
// series that add the rows' calls up, and retention pruning in batches.
import type { Pool, QueryResultRow } from 'pg';
import { fillDays, pageOf, seriesStart } from './common';
import { toLogEntry, whereClause, type LogRow } from './postgres-rows';
import type { GatewayStore } from './types';

type RequestLog = Pick<GatewayStore, 'logRequest' | 'queryRequests' | 'countRequests' | 'pruneRequests' | 'requestsPerDay'>;

export function postgresRequestLog(pool: Pool): RequestLog {
  const q = async <R extends QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> => (await pool.query<R>(sql, params)).rows;
  return {
    async logRequest(e) {
      await pool.query(
        `INSERT INTO request_log (request_id, client_request_id, time, token_id, workspace_id, method, service, endpoint,
           status, error_type, credits_charged, bytes_in, bytes_out, upstream_ms, total_ms, client_ip, error_message,
           calls, aggregate_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 1, $18)
         ON CONFLICT (aggregate_key) DO UPDATE SET calls = request_log.calls + 1,
           bytes_in = request_log.bytes_in + excluded.bytes_in, bytes_out = request_log.bytes_out + excluded.bytes_out,
           credits_charged = request_log.credits_charged + excluded.credits_charged`,
        [
          e.requestId,
          e.clientRequestId ?? null,
          e.time,
          e.tokenId,
          e.workspaceId,
          e.method,
          e.service,
          e.endpoint,
          e.status,
          e.errorType,
          e.creditsCharged,
          e.bytesIn,
          e.bytesOut,
          e.upstreamMs,
          e.totalMs,
          e.clientIp,
          e.errorMessage ?? null,
          e.aggregateKey ?? null,
        ],
      );
    },
    async queryRequests(filter) {
      const params: unknown[] = [];
      const where = whereClause(filter, params);
      const { limit, offset } = pageOf(filter);
      params.push(limit, offset);
      const rows = await q<LogRow>(
        `SELECT * FROM request_log ${where} ORDER BY time DESC, id DESC LIMIT $${params.length - 1} OFFSET $${params.length}`,
        params,
      );
      return rows.map(toLogEntry);
    },
    async countRequests(filter) {
      const params: unknown[] = [];
      const [row] = await q<{ n: string }>(`SELECT COALESCE(SUM(calls), 0) AS n FROM request_log ${whereClause(filter, params)}`, params);
      return Number(row.n);
    },
    async pruneRequests(before, maxRows) {
      const r = await pool.query(
        'DELETE FROM request_log WHERE id IN (SELECT id FROM request_log WHERE time < $1::timestamptz ORDER BY time LIMIT $2)',
        [before, Math.max(1, Math.trunc(maxRows))],
      );
      return r.rowCount ?? 0;
    },
    async requestsPerDay(workspaceId, days) {
      const { start, n } = seriesStart(days);
      const rows = await q<{ day: string; count: number; errors: number }>(
        `SELECT to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, SUM(calls)::int AS count,
                (COALESCE(SUM(calls) FILTER (WHERE status >= 400), 0))::int AS errors
         FROM request_log WHERE workspace_id = $1 AND time >= $2 GROUP BY 1`,
        [workspaceId, start],
      );
      return fillDays(start, n, rows);
    },
  };
}
