// WorkQueue: de-duplication, one worker per key, the deadline lane ahead of event work (issue 11), and the
// workqueue_* metrics it feeds. Unit tests, no fakes beyond a worker that can be held.
import { expect } from 'chai';
import fc from 'fast-check';
import { RuntimeMetrics } from '../metrics.js';
import { Priority, WorkQueue } from './queue.js';

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));
/** Waits until `done()` holds, up to `ms` (a loaded CI machine delays timers well past a fixed sleep). */
async function until(done: () => boolean, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; !done() && Date.now() < end;) await tick(5);
}

/** A worker that records keys and can be held on a key until released. */
function recorder() {
  const order: string[] = [];
  let release: (() => void) | undefined;
  const held = new Set<string>();
  return {
    order,
    hold(key: string) {
      held.add(key);
    },
    release() {
      release?.();
    },
    work: async (key: string) => {
      order.push(key);
      if (held.delete(key)) await new Promise<void>((r) => (release = r));
    },
  };
}

/** One worker, held on the key `busy`: what is added next waits in the lanes. */
async function busyWorker(queue: WorkQueue) {
  const r = recorder();
  r.hold('busy');
  queue.run(1, r.work);
  queue.add('busy');
  await tick();
  return r;
}

async function value(m: RuntimeMetrics, name: string, labels: Record<string, string> = {}): Promise<number> {
  const got = await m.registry.getSingleMetric(name)!.get();
  const hits = got.values.filter(
    (v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x) && !('le' in v.labels),
  );
  return hits.reduce((s, v) => s + v.value, 0);
}

describe('WorkQueue', () => {
  let q: WorkQueue;
  afterEach(async () => {
    await q?.shutdown();
  });

  it('runs a key once however often it was added, and again if added while running', async () => {
    q = new WorkQueue();
    const r = recorder();
    r.hold('a');
    q.add('a');
    q.add('a');
    q.run(2, r.work);
    await tick();
    q.add('a'); // while running: runs once more after
    q.add('a');
    expect(r.order).to.deep.equal(['a']);
    r.release();
    await tick(5);
    expect(r.order).to.deep.equal(['a', 'a']);
  });

  it('warm-up workers work keys at once, stop when no longer wanted, and pass on a wake they took to a worker that stays', async () => {
    q = new WorkQueue();
    let warm = true;
    let running = 0;
    let most = 0;
    const done: string[] = [];
    const work = async (key: string) => {
      most = Math.max(most, ++running);
      await tick(5);
      running--;
      done.push(key);
    };
    q.run(1, work);
    q.runWhile(3, work, () => warm);
    for (const k of ['a', 'b', 'c', 'd']) q.add(k);
    await tick(30);
    expect(most, 'four at once while warming').to.equal(4);
    warm = false;
    await tick(5);
    // Every worker is idle: a warm-up worker may be woken first; it stops and the key still runs.
    for (const k of ['e', 'f', 'g']) q.add(k);
    await until(() => done.length >= 7);
    expect(done.slice(4).sort()).to.deep.equal(['e', 'f', 'g']);
    expect(most).to.equal(4);
  });

  it('works a fired deadline before event work queued earlier', async () => {
    const r = await busyWorker((q = new WorkQueue()));
    for (const k of ['e1', 'e2', 'e3']) q.add(k);
    q.addAfter('d1', 1); // fires while the only worker is busy
    await tick(20);
    r.release();
    await tick(5);
    expect(r.order).to.deep.equal(['busy', 'd1', 'e1', 'e2', 'e3']);
  });

  it('moves a queued key to the deadline lane without running it twice', async () => {
    const r = await busyWorker((q = new WorkQueue()));
    q.add('e1');
    q.add('late');
    q.add('late', Priority.deadline);
    r.release();
    await tick(5);
    expect(r.order).to.deep.equal(['busy', 'late', 'e1']);
  });

  it('keeps only the earliest timer of a key; a retry wakes in the event lane', async () => {
    let now = 1_000;
    q = new WorkQueue(() => now);
    q.addAfter('a', 60_000);
    q.addAfter('a', 120_000);
    expect(q.nextWake('a')).to.equal(61_000);
    q.addAfter('a', 10_000);
    expect(q.nextWake('a')).to.equal(11_000);
    now = 2_000;
    expect(q.retry('b')).to.equal(500);
    expect(q.retry('b')).to.equal(1_000);
    q.succeeded('b');
    expect(q.retry('b')).to.equal(500);
  });

  it('property: each key once, deadline lane first, FIFO by the add that put it in its lane (seeded)', async () => {
    const seed = 4242;
    let runs = 0;
    let adds = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ key: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), deadline: fc.boolean() }), {
          maxLength: 30,
        }),
        async (ops) => {
          runs++;
          adds += ops.length;
          const queue = new WorkQueue();
          const r = await busyWorker(queue);
          // The model: where each key stands.
          const lane = new Map<string, { p: number; at: number }>();
          ops.forEach((op, i) => {
            const p = op.deadline ? Priority.deadline : Priority.event;
            queue.add(op.key, p);
            const cur = lane.get(op.key);
            if (!cur || cur.p < p) lane.set(op.key, { p, at: i });
          });
          const expected = [...lane.entries()].sort((x, y) => y[1].p - x[1].p || x[1].at - y[1].at).map(([k]) => k);
          expect(queue.length).to.equal(expected.length);
          r.release();
          await tick(2);
          await queue.shutdown();
          expect(r.order).to.deep.equal(['busy', ...expected]);
        },
      ),
      { seed, numRuns: 200 },
    );
    console.log(`      queue property: seed ${seed}, ${runs} runs, ${adds} adds`);
  });

  it('feeds workqueue_* like controller-runtime: adds, depth by priority, durations, retries, in-progress', async () => {
    const m = new RuntimeMetrics({ processMetrics: false });
    q = new WorkQueue(Date.now, m.queue('machinejoincheck'));
    const labels = { name: 'machinejoincheck', controller: 'machinejoincheck' };
    const r = recorder();
    r.hold('a');
    q.add('a');
    q.add('b');
    q.add('b', Priority.deadline);
    expect(await value(m, 'workqueue_adds_total', labels)).to.equal(2);
    expect(await value(m, 'workqueue_depth', { ...labels, priority: '0' })).to.equal(1);
    expect(await value(m, 'workqueue_depth', { ...labels, priority: '1' })).to.equal(1);
    q.run(1, r.work);
    await tick(30);
    // 'b' (deadline lane) went first and is done; 'a' is held.
    expect(r.order).to.deep.equal(['b', 'a']);
    expect(await value(m, 'workqueue_depth', labels)).to.equal(0);
    expect(await value(m, 'workqueue_longest_running_processor_seconds', labels)).to.be.greaterThan(0.01);
    expect(await value(m, 'workqueue_unfinished_work_seconds', labels)).to.be.greaterThan(0.01);
    q.addAfter('c', 60_000);
    q.retry('d');
    expect(await value(m, 'workqueue_retries_total', labels)).to.equal(2);
    r.release();
    await tick(5);
    expect(await value(m, 'workqueue_longest_running_processor_seconds', labels)).to.equal(0);
    const text = await m.registry.metrics();
    expect(text).to.match(
      /^workqueue_queue_duration_seconds_count\{name="machinejoincheck",controller="machinejoincheck"\} 2$/m,
    );
    expect(text).to.match(
      /^workqueue_work_duration_seconds_count\{name="machinejoincheck",controller="machinejoincheck"\} 2$/m,
    );
    expect(text).to.include(
      'workqueue_work_duration_seconds_bucket{le="1e-8",name="machinejoincheck",controller="machinejoincheck"}',
    );
  });
});
