// The jobs runner logs how long until a retry with formatSeconds (src/audio/limits.ts): JOBS_RETRY_SECONDS may be as
// short as 0.1 s, which whole seconds logged as "retrying in 0 s"; the backoff's longer waits read in minutes.
import { formatSeconds } from '../../src/audio/limits';

test('retry waits are logged in tenths under a minute, in minutes above', () => {
  expect([0.1, 0.4, 1, 1.6, 2, 8, 9.94, 40, 160, 600].map(formatSeconds)).toEqual([
    '0.1 s', '0.4 s', '1 s', '1.6 s', '2 s', '8 s', '9.9 s', '40 s', '2.7 min', '10 min',
  ]);
});
