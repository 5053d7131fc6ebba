// The pipeline that runs the policies (src/gateway/pipeline.ts): order, stops ('handled', 'pass'), the settle phase
// after every run (exceptions included), and end hooks armed only from the marked step on, run once the pipeline is
// done and the response ended. Small policies written here stand in for the gateway's eleven.
import type { NextFunction } from 'express';
import { reject, type Call, type Policy } from '../../src/gateway/call';
import { Pipeline } from '../../src/gateway/pipeline';
import { exchange, testClock, testLogger } from '../helpers/gateway-policy-helpers';

interface Tagged extends Call {
  tag: string;
}

function trace() {
  const steps: string[] = [];
  const step = (name: string, verdict: 'continue' | 'handled' | 'pass' = 'continue'): Policy => ({
    name,
    run(call) {
      steps.push(name);
      if (verdict === 'handled') return reject(call, 'scope_denied', name);
      return verdict;
    },
  });
  return { steps, step };
}

async function drive(pipeline: Pipeline<Call>, path = '/v1/x') {
  const clock = testClock();
  const { logger, lines } = testLogger();
  const ex = await exchange({ path, now: clock.now });
  const passed: unknown[] = [];
  const next = ((err?: unknown) => passed.push(err ?? 'next')) as NextFunction;
  await pipeline.handler({ begin: () => ex.call, now: clock.now, logger })(ex.call.req, ex.call.res, next);
  return { ...ex, passed, lines, clock };
}

test('runs the steps in order and stops at the first that answers; settle runs after, then the end hooks', async () => {
  const { steps, step } = trace();
  const pipeline = Pipeline.start()
    .use(step('a'))
    .narrow({ name: 'tag', run: (call) => Object.assign(call, { tag: 'tagged' }) }, { armsEndHooks: true })
    .use({ name: 'b', run: (call: Tagged) => (steps.push(`b:${call.tag}`), 'continue') })
    .use({ ...step('c', 'handled'), settle: () => void steps.push('settle') })
    .use(step('d'))
    .onEnd({ name: 'end', onEnd: (_call, finished) => void steps.push(`end:${finished}`) });
  const { response, passed } = await drive(pipeline);
  expect((await response).status).toBe(403);
  await new Promise((r) => setImmediate(r));
  expect(steps).toEqual(['a', 'b:tagged', 'c', 'settle', 'end:true']);
  expect(passed).toEqual([]);
});

test("'pass' hands the request on (next) and nothing is logged, since no armed step ran", async () => {
  const { steps, step } = trace();
  const pipeline = Pipeline.start()
    .use(step('a'))
    .use({ ...step('b', 'pass'), settle: () => void steps.push('settle') })
    .narrow({ name: 'arm', run: (call) => call }, { armsEndHooks: true })
    .onEnd({ name: 'end', onEnd: () => void steps.push('end') });
  const { call, passed, response } = await drive(pipeline, '/console');
  expect(passed).toEqual(['next']);
  call.res.status(200).end();
  await response;
  await new Promise((r) => setImmediate(r));
  expect(steps).toEqual(['a', 'b', 'settle']);
});

test('end hooks run once, when the client goes away', async () => {
  const { steps, step } = trace();
  const pipeline = Pipeline.start()
    .narrow({ name: 'arm', run: (call) => call }, { armsEndHooks: true })
    .use(step('a'))
    .onEnd({ name: 'end', onEnd: (_call, finished) => void steps.push(`end:${finished}`) });
  const { abort, call } = await drive(pipeline);
  const closed = new Promise((r) => call.res.once('close', r));
  abort();
  await closed;
  await new Promise((r) => setImmediate(r));
  expect(steps).toEqual(['a', 'end:false']);
  expect(call.endedAt).toBeDefined();
});

test('an exception: internal_error on the context, the error to next, settle still runs', async () => {
  const steps: string[] = [];
  const pipeline = Pipeline.start()
    .use({
      name: 'boom',
      run: () => {
        throw new Error('boom');
      },
      settle: () => void steps.push('settle'),
    })
    .use({ name: 'after', run: () => (steps.push('after'), 'continue') });
  const { call, passed } = await drive(pipeline);
  expect(call.ctx.errorType).toBe('internal_error');
  expect((passed[0] as Error).message).toBe('boom');
  expect(steps).toEqual(['settle']);
});

test('a failing settle or end hook is logged and does not stop the ones after it', async () => {
  const steps: string[] = [];
  const pipeline = Pipeline.start()
    .narrow({ name: 'arm', run: (call) => call }, { armsEndHooks: true })
    .use({
      name: 'a',
      run: (call) => reject(call, 'scope_denied', 'no'),
      settle: () => {
        throw new Error('settle broke');
      },
    })
    .use({ name: 'b', run: () => 'continue', settle: () => void steps.push('settle b') })
    .onEnd({
      name: 'bad-end',
      onEnd: () => {
        throw new Error('end broke');
      },
    })
    .onEnd({ name: 'end', onEnd: () => void steps.push('end') });
  const { response, lines } = await drive(pipeline);
  await response;
  await new Promise((r) => setImmediate(r));
  expect(steps).toEqual(['settle b', 'end']);
  expect(lines.some((l) => l.includes('a gateway settle hook failed'))).toBe(true);
  expect(lines.some((l) => l.includes('a gateway end hook failed') && l.includes('bad-end'))).toBe(true);
});
