// outbound/: requests to URLs that API users chose, without reaching this server's own networks.
//   url-guard.ts   which URLs and addresses are allowed (checked inside the connection's DNS lookup)
//   safe-http.ts   downloads and POSTs through the guard: timeouts, size limit, redirects re-checked
//   webhooks.ts    signed job webhooks, retried from rows in the job store
//   signing.ts     the Standard Webhooks headers (webhook-id/-timestamp/-signature) sent beside X-NS-Signature
// Imports only the shared files of src/jobs/ (types, views, metrics, failed-write).
export { WebhookDispatcher } from './webhooks';
