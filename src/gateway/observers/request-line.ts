// The structured line the gateway writes for every /v1 call (LOG_REQUESTS, on by default outside tests):
//
//   {"level":"info","time":"…","service":"gateway","request_id":"req_…","method":"POST","endpoint":"denoise",
//    "status":200,"error_type":null,"workspace":"ws_…","key_prefix":"mw_live_AbCd","credits":1,
//    "upstream_ms":812,"total_ms":845,"audio_s":12.4,"model":"nsm-2","bytes_in":…,"bytes_out":…,
//    "client_ip":"…","msg":"POST /v1/noise-suppressor/denoise 200"}
//
// Client mistakes (4xx) are not operator problems: they stay at "info"; only 5xx (the service failed) are "error".
import type { CallObserver } from '../types';
import type { Logger } from '../../logging';

export function requestLineObserver(logger: Logger): CallObserver {
  return ({ entry, keyPrefix, model, audioSeconds }) => {
    const fields = {
      request_id: entry.requestId,
      method: entry.method,
      service_name: entry.service,
      endpoint: entry.endpoint,
      status: entry.status,
      error_type: entry.errorType,
      error_message: entry.status >= 400 ? (entry.errorMessage ?? null) : undefined,
      workspace: entry.workspaceId,
      key_prefix: keyPrefix,
      credits: entry.creditsCharged,
      upstream_ms: entry.upstreamMs,
      total_ms: entry.totalMs,
      audio_s: audioSeconds,
      model,
      bytes_in: entry.bytesIn,
      bytes_out: entry.bytesOut,
      client_ip: entry.clientIp,
    };
    const path = `/v1/${entry.service ?? ''}${entry.endpoint ? '/' + entry.endpoint : ''}`;
    const msg = `${entry.method} ${path} ${entry.status}`;
    if (entry.status >= 500) logger.error(fields, msg);
    else logger.info(fields, msg);
  };
}
