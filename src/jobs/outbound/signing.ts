// Standard Webhooks signatures (https://www.standardwebhooks.com, spec 1.0.0): the webhook-id / webhook-timestamp /
// webhook-signature headers sent beside X-NS-Signature, so receivers verify with an off-the-shelf library such as
// the `standardwebhooks` npm package, keyed with the workspace's `whsec_…` secret exactly as the console shows it.
import crypto from 'node:crypto';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';

/** Strict base64 (standard alphabet, canonical padding), as the spec's reference libraries decode it. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The HMAC key a Standard Webhooks library derives from a secret: the bytes of the base64 text after `whsec_`.
 * Our secrets are `whsec_` + 32 base62 characters; base62 is a subset of the base64 alphabet and 32 is a multiple
 * of 4, so every generated secret decodes to a 24-byte key (the spec's minimum) and the shown string works as is.
 * X-NS-Signature keeps keying its HMAC with the whole secret string, so existing receivers are unaffected.
 * Null for a secret that is not valid base64 (none the server generates): such a delivery carries X-NS-Signature only.
 */
export function standardWebhookKey(secret: string): Buffer | null {
  const text = secret.startsWith(WEBHOOK_SECRET_PREFIX) ? secret.slice(WEBHOOK_SECRET_PREFIX.length) : secret;
  if (text.length === 0 || !BASE64.test(text)) return null;
  return Buffer.from(text, 'base64');
}

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` (the spec's symmetric signature). */
export function standardWebhookSignature(key: Buffer, id: string, unixSeconds: number, body: string): string {
  return 'v1,' + crypto.createHmac('sha256', key).update(`${id}.${unixSeconds}.${body}`, 'utf8').digest('base64');
}

/**
 * The three Standard Webhooks headers for one attempt. `id` is the delivery id (`whd_…`), the same on every retry so
 * receivers can drop duplicates; the timestamp is this attempt's, like X-NS-Signature's `t`.
 */
export function standardWebhookHeaders(secret: string, id: string, body: string, unixSeconds: number): Record<string, string> {
  const key = standardWebhookKey(secret);
  if (!key) return {};
  return {
    'webhook-id': id,
    'webhook-timestamp': String(unixSeconds),
    'webhook-signature': standardWebhookSignature(key, id, unixSeconds, body),
  };
}
