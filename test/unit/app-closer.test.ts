// The one close stack of createApp (src/app/closer.ts): newest first, every step even after one throws, and an
// opening step that fails closes what was opened before it.
import { Closer } from '../../src/app';

test('closeAll runs the deferred closes newest first, all of them, then throws the first error', async () => {
  const order: string[] = [];
  const closer = new Closer();
  closer.defer(() => order.push('store'));
  closer.defer(async () => {
    order.push('engine');
    throw new Error('engine failed');
  });
  closer.defer(() => order.push('jobs'));
  closer.defer(async () => {
    order.push('forwarder');
    throw new Error('forwarder failed');
  });
  await expect(closer.closeAll()).rejects.toThrow('forwarder failed');
  expect(order).toEqual(['forwarder', 'jobs', 'engine', 'store']);
  await closer.closeAll(); // nothing left: each close runs once
  expect(order).toHaveLength(4);
});

test('a failing opening step closes what was opened before it and rethrows its own error', async () => {
  const order: string[] = [];
  const closer = new Closer();
  closer.defer(() => order.push('store'));
  expect(await closer.open(async () => 'shared state')).toBe('shared state');
  closer.defer(async () => {
    order.push('shared state');
    throw new Error('hidden by the opening error');
  });
  await expect(closer.open(async () => Promise.reject(new Error('no engine')))).rejects.toThrow('no engine');
  expect(order).toEqual(['shared state', 'store']);
});
