// Policy 8 of 11, declared-body-size: a cheap early 413 payload_too_large when the Content-Length a client declares
// exceeds the route's body limit, before any credit is held; the forwarder still counts bytes while streaming.
// Runs after rate-limit, before credits.
import { reject, type Policy, type RoutedCall } from '../call';

export function declaredBodySizePolicy(): Policy<RoutedCall> {
  return {
    name: 'declared-body-size',
    run(call) {
      const { maxBodyBytes } = call.route;
      const declared = Number(call.req.headers['content-length']);
      if (maxBodyBytes > 0 && Number.isFinite(declared) && declared > maxBodyBytes) {
        return reject(call, 'payload_too_large', `Request body of ${declared} bytes exceeds the ${maxBodyBytes}-byte limit of this endpoint.`);
      }
      return 'continue';
    },
  };
}
