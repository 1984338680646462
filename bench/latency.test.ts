// Unit test: the deadlines the bench measures each side's latency from (bench/latency.ts).
import { expect } from 'chai';
import type { ClusterTimes } from './fleet.js';
import { detection, initializedWhenSaid } from './latency.js';
import type { MachineRecord } from './watch.js';

const at = (s: string) => Date.parse(`2026-12-07T10:${s}Z`);

describe('bench: deadlines', () => {
  // The burst writes its KubeadmControlPlanes' status initialized, then CAPI copies it into the Cluster's condition.
  // JoinGuard takes either signal (DESIGN, "the Cluster or the KubeadmControlPlane says initialized"): seeing the
  // KCP first, it keeps the first time it saw it, in whole seconds (clocks.ts controlPlaneInitializedAt). When CAPI's
  // condition lands in the next second, the bench, timing from the condition alone, puts every deadline a second
  // late and counts JoinGuard's marks (0.1–0.6 s after its own deadline at the smoke size) early: 10 of 10 failed
  // bench-owners' smoke once. Here: the KCP said so at 00.9 s, the condition came at 01 s.
  const clusters = new Map<string, ClusterTimes>([
    ['c0002', { ready: true, controlPlaneInitializedAt: at('00:01.000'), infrastructureReadyAt: at('00:00.000') }],
    ['c0000', { ready: true, controlPlaneInitializedAt: at('00:01.000'), infrastructureReadyAt: at('00:00.000') }],
  ]);
  const said = new Map([['c0002', at('00:00.900')]]);

  it("times a burst Cluster's initialization from the second the bench said it, if the condition came later", () => {
    const c = initializedWhenSaid(clusters, said);
    expect(c.get('c0002')!.controlPlaneInitializedAt).to.equal(at('00:00.000'));
    expect(c.get('c0000')!.controlPlaneInitializedAt, 'a Cluster the bench did not initialize').to.equal(
      at('00:01.000'),
    );
    const early = new Map([['c0002', at('00:02.000')]]);
    expect(initializedWhenSaid(clusters, early).get('c0002')!.controlPlaneInitializedAt, 'the earlier').to.equal(
      at('00:01.000'),
    );
  });

  it('counts no mark before the deadline when JoinGuard marks just after its own', () => {
    const r = {
      name: 'c0002-watch-p01-0000',
      pool: 'c0002-watch',
      createdAt: at('59:50.000') - 3600_000,
      infraReadyAt: at('59:52.000') - 3600_000,
      bootstrapReadyAt: at('59:52.000') - 3600_000,
      marks: { joinguard: { seenAt: at('00:13.300'), how: 'OwnerRemediated' } },
    } as unknown as MachineRecord;
    const d = detection('joinguard', [r], initializedWhenSaid(clusters, said), 13_000, at('00:30.000'));
    expect(d.early).to.equal(0);
    expect(d.p50!.s).to.equal(0.3);
  });
});
