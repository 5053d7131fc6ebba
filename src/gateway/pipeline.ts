// Runs the gateway's policies in order for every request (the order itself is written in gateway.ts). Built in
// stages so that the compiler checks it: a policy that needs an AuthenticatedCall can only be added after the gate
// that produces one. Policy phases, after Kong's: `run` for each call in order until one answers, `settle` once the
// run is over however it ended, and the end hooks once the response is out or the client went away.
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from '../logging';
import type { Call, EndHook, Gate, Policy, Verdict } from './call';

interface Step {
  name: string;
  /** Once this step has run (and not passed the request on), the call is logged: the end hooks are armed. */
  armsEndHooks: boolean;
  /** The call to go on with (a gate's narrowed call), 'continue' (the same call), or a stop. */
  run(call: Call): Call | Verdict | Promise<Call | Verdict>;
}

type Settle = { name: string; settle(call: Call): void | Promise<void> };

export interface PipelineRuntime {
  /** Makes the call for a request (its context, client address, start time). */
  begin(req: Request, res: Response): Call;
  now: () => number;
  logger: Logger;
}

/** An ordered list of policies for calls that have reached type C so far. Immutable: each method returns a new one. */
export class Pipeline<C extends Call> {
  private constructor(
    private readonly steps: readonly Step[],
    private readonly settles: readonly Settle[],
    private readonly endHooks: readonly EndHook[],
  ) {}

  static start(): Pipeline<Call> {
    return new Pipeline<Call>([], [], []);
  }

  /** Adds a policy that runs on calls of the current type. */
  use(policy: Policy<C>): Pipeline<C> {
    // The stages guarantee that every call reaching this step is a C (the gates before it made it one).
    const step: Step = { name: policy.name, armsEndHooks: false, run: (call) => policy.run(call as C) };
    const settle = policy.settle;
    const settles = settle ? [...this.settles, { name: policy.name, settle: settle.bind(policy) }] : this.settles;
    return new Pipeline<C>([...this.steps, step], settles, this.endHooks);
  }

  /** Adds a gate: the policies after it see the narrower call type it produces. */
  narrow<N extends C>(gate: Gate<C, N>, options: { armsEndHooks?: boolean } = {}): Pipeline<N> {
    const step: Step = { name: gate.name, armsEndHooks: options.armsEndHooks ?? false, run: (call) => gate.run(call as C) };
    return new Pipeline<N>([...this.steps, step], this.settles, this.endHooks);
  }

  /** Adds a hook that runs once per logged call when its response ends. */
  onEnd(hook: EndHook): Pipeline<C> {
    return new Pipeline<C>(this.steps, this.settles, [...this.endHooks, hook]);
  }

  /** The Express handler running the steps for each request. */
  handler({ begin, now, logger }: PipelineRuntime): RequestHandler {
    const { steps, settles, endHooks } = this;
    return async (req, res, next) => {
      let call = begin(req, res);
      // Settles when the steps and settle hooks are done (after the forwarder's refund decision), so the log row
      // of an aborted call carries the final credits even though 'close' fired first.
      let pipelineSettled: () => void = () => {};
      const pipelineDone = new Promise<void>((resolve) => (pipelineSettled = resolve));
      let armed = false;
      const arm = () => {
        // The end hooks run once, on 'finish' (response sent) or 'close' (client aborted).
        armed = true;
        let done = false;
        const end = (finished: boolean) => {
          if (done) return;
          done = true;
          call.endedAt = now();
          void pipelineDone.then(async () => {
            for (const hook of endHooks) {
              try {
                await hook.onEnd(call, finished);
              } catch (err) {
                logger.error({ err, request_id: call.ctx.requestId, hook: hook.name }, 'a gateway end hook failed');
              }
            }
          });
        };
        res.once('finish', () => end(true));
        res.once('close', () => end(res.writableFinished));
      };
      try {
        for (const step of steps) {
          const result: Call | Verdict = await step.run(call);
          if (result === 'pass') return next();
          if (!armed && step.armsEndHooks) arm();
          if (result === 'handled') return;
          if (result !== 'continue') call = result;
        }
      } catch (err) {
        call.ctx.errorType = 'internal_error';
        next(err);
      } finally {
        for (const { name, settle } of settles) {
          try {
            await settle(call);
          } catch (err) {
            logger.error({ err, request_id: call.ctx.requestId, hook: name }, 'a gateway settle hook failed');
          }
        }
        pipelineSettled();
      }
    };
  }
}
