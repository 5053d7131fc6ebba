// The jobs runner's log says how long until a retry: JOBS_RETRY_SECONDS may be as short as 0.1 s, which whole seconds
// logged as "retrying in 0 s".
import { inSeconds } from '../../src/jobs/queue/runner';

test('waits under 10 s are logged in tenths, longer ones in whole seconds', () => {
  expect([100, 400, 1000, 1600, 2000, 9_940, 9_960, 10_000, 40_400, 600_000].map(inSeconds)).toEqual([
    '0.1 s', '0.4 s', '1 s', '1.6 s', '2 s', '9.9 s', '10 s', '10 s', '40 s', '600 s',
  ]);
});
