import { expect } from 'chai';
import {
  matchesSelector,
  MalformedObjectError,
  readBootstrapConfig,
  readCluster,
  readKubeadmControlPlane,
  readMachineHealthCheck,
} from './readers.js';
import type { LabelSelectorModel } from './model.js';
import {
  clusterV1beta1,
  clusterV1beta2,
  kcpV1beta1,
  kcpV1beta2,
  kubeadmConfig,
  mhcV1beta1,
  mhcV1beta2,
  ms,
  T0,
  T3,
} from './testdata/fixtures.js';

type Json = Record<string, any>;
const cond = (list: Json[], type: string): Json => list.find((c) => c.type === type)!;

describe('api/capi readCluster', () => {
  it('v1beta2: initialized, endpoint, controlPlaneRef, probe', () => {
    expect(readCluster(clusterV1beta2(), 'v1beta2')).to.deep.equal({
      name: 'c1',
      namespace: 'default',
      uid: 'uid-c-1',
      resourceVersion: '900',
      annotations: {},
      paused: false,
      deleting: false,
      controlPlaneInitialized: { value: true, since: ms(T3) },
      infrastructureReady: { value: true, since: ms(T0) },
      controlPlaneEndpoint: { host: '172.18.0.3', port: 6443 },
      controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: 'c1-cp' },
      remoteConnection: { value: true, since: ms(T3) },
    });
  });

  it('v1beta1: status.controlPlaneReady and the v1beta1 ControlPlaneInitialized condition; probe from status.v1beta2', () => {
    expect(readCluster(clusterV1beta1(), 'v1beta1')).to.deep.equal({
      name: 'c1',
      namespace: 'default',
      uid: 'uid-c-1',
      resourceVersion: '900',
      annotations: {},
      paused: false,
      deleting: false,
      controlPlaneInitialized: { value: true, since: ms(T3) },
      infrastructureReady: { value: true, since: ms(T0) },
      controlPlaneEndpoint: { host: '172.18.0.3', port: 6443 },
      controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: 'c1-cp' },
      remoteConnection: { value: true, since: ms(T3) },
    });
  });

  it('a cluster being created: not initialized, no endpoint yet, probe not established', () => {
    const o = clusterV1beta2();
    o['status'].initialization = { infrastructureProvisioned: true };
    Object.assign(cond(o['status'].conditions, 'ControlPlaneInitialized'), {
      status: 'False',
      reason: 'NotInitialized',
      message: 'Control plane not yet initialized',
    });
    Object.assign(cond(o['status'].conditions, 'RemoteConnectionProbe'), {
      status: 'False',
      reason: 'ProbeFailed',
      message: 'Remote connection not established yet',
    });
    o['spec'].controlPlaneEndpoint = { host: '172.18.0.3' };
    const c = readCluster(o, 'v1beta2');
    expect(c.controlPlaneInitialized).to.deep.equal({ value: false });
    expect(c.remoteConnection).to.deep.equal({ value: false });
    expect(c).not.to.have.property('controlPlaneEndpoint');
  });

  it('initialized on either signal (set once, never reset); Unknown probe is not a working connection', () => {
    const o = clusterV1beta2();
    delete o['status'].initialization;
    Object.assign(cond(o['status'].conditions, 'RemoteConnectionProbe'), { status: 'Unknown', reason: 'ProbeUnknown' });
    const c = readCluster(o, 'v1beta2');
    expect(c.controlPlaneInitialized).to.deep.equal({ value: true, since: ms(T3) });
    expect(c.remoteConnection).to.deep.equal({ value: false });
    const b = clusterV1beta1();
    b['status'].conditions = [];
    expect(readCluster(b, 'v1beta1').controlPlaneInitialized).to.deep.equal({ value: true });
  });

  it('paused by spec.paused or the annotation; deleting by deletionTimestamp', () => {
    for (const v of ['v1beta2', 'v1beta1'] as const) {
      const a = v === 'v1beta2' ? clusterV1beta2() : clusterV1beta1();
      a['spec'].paused = true;
      expect(readCluster(a, v).paused).to.equal(true);
      const b = v === 'v1beta2' ? clusterV1beta2() : clusterV1beta1();
      b['metadata'].annotations = { 'cluster.x-k8s.io/paused': '' };
      b['metadata'].deletionTimestamp = T3;
      expect(readCluster(b, v)).to.include({ paused: true, deleting: true });
    }
  });

  it("keeps the Cluster's annotations under JoinGuard's and CAPI's prefixes, frozen; others dropped", () => {
    for (const v of ['v1beta2', 'v1beta1'] as const) {
      const o = v === 'v1beta2' ? clusterV1beta2() : clusterV1beta1();
      o['metadata'].annotations = JSON.parse(
        '{"joinguard.io/maintenance": "", "cluster.x-k8s.io/paused": "", "example.com/owner": "x", "__proto__": "y"}',
      );
      const c = readCluster(o, v);
      expect(c.annotations).to.deep.equal({ 'joinguard.io/maintenance': '', 'cluster.x-k8s.io/paused': '' });
      expect(Object.isFrozen(c.annotations)).to.equal(true);
      expect(c.paused).to.equal(true);
    }
  });

  it('refuses a malformed Cluster, naming the field', () => {
    const table: [(o: Json) => void, string][] = [
      [(o) => delete o['metadata'].uid, 'metadata.uid'],
      [(o) => (o['metadata'].creationTimestamp = 'then'), 'metadata.creationTimestamp'],
      [(o) => (o['status'].conditions = 'ok'), 'status.conditions'],
      [(o) => (o['spec'].paused = 'yes'), 'spec.paused'],
      [(o) => (o['spec'].controlPlaneEndpoint.port = '6443'), 'spec.controlPlaneEndpoint.port'],
      [
        (o) => (o['metadata'].annotations = { 'joinguard.io/maintenance': true }),
        'metadata.annotations["joinguard.io/maintenance"]',
      ],
    ];
    for (const [change, field] of table) {
      const o = clusterV1beta2();
      change(o);
      expect(() => readCluster(o, 'v1beta2'), field)
        .to.throw(MalformedObjectError)
        .with.property('field', field);
    }
  });
});

describe('api/capi readKubeadmControlPlane', () => {
  it('v1beta2: spec.remediation in seconds, status.initialization.controlPlaneInitialized', () => {
    expect(readKubeadmControlPlane(kcpV1beta2(), 'v1beta2')).to.deep.equal({
      name: 'c1-cp',
      namespace: 'default',
      uid: 'uid-kcp-1',
      initialized: true,
      replicas: 3,
      version: 'v1.33.1',
      remediation: { maxRetry: 3, retryPeriodSeconds: 300, minHealthyPeriodSeconds: 7200 },
    });
  });

  it('v1beta1: spec.remediationStrategy durations, status.initialized', () => {
    expect(readKubeadmControlPlane(kcpV1beta1(), 'v1beta1')).to.deep.equal({
      name: 'c1-cp',
      namespace: 'default',
      uid: 'uid-kcp-1',
      initialized: false,
      replicas: 3,
      version: 'v1.30.4',
      remediation: { maxRetry: 3, retryPeriodSeconds: 300, minHealthyPeriodSeconds: 7200 },
    });
  });

  it("parses KCP's remediation-in-progress annotation, and still notes one it cannot parse", () => {
    const o = kcpV1beta2();
    o['metadata'].annotations = {
      'controlplane.cluster.x-k8s.io/remediation-in-progress': JSON.stringify({
        machine: 'c1-cp-aaaaa',
        timestamp: T3,
        retryCount: 1,
      }),
    };
    expect(readKubeadmControlPlane(o, 'v1beta2').remediationInProgress).to.deep.equal({
      machine: 'c1-cp-aaaaa',
      timestamp: ms(T3),
      retryCount: 1,
    });
    o['metadata'].annotations['controlplane.cluster.x-k8s.io/remediation-in-progress'] = 'yes';
    expect(readKubeadmControlPlane(o, 'v1beta2').remediationInProgress).to.deep.equal({});
  });

  it('an empty remediation spec is empty; a bad v1beta1 duration is refused, naming it', () => {
    const o = kcpV1beta2();
    delete o['spec'].remediation;
    expect(readKubeadmControlPlane(o, 'v1beta2').remediation).to.deep.equal({});
    const b = kcpV1beta1();
    b['spec'].remediationStrategy.retryPeriod = '5 minutes';
    expect(() => readKubeadmControlPlane(b, 'v1beta1'))
      .to.throw(MalformedObjectError)
      .with.property('field', 'spec.remediationStrategy.retryPeriod');
  });
});

describe('api/capi readBootstrapConfig', () => {
  for (const v of ['v1beta2', 'v1beta1'] as const) {
    it(`${v}: init, joining control-plane and worker KubeadmConfigs`, () => {
      expect(readBootstrapConfig(kubeadmConfig(v, 'init'))).to.deep.equal({
        kind: 'KubeadmConfig',
        name: 'c1-cp-aaaaa',
        namespace: 'default',
        hasJoinConfiguration: false,
        joinsControlPlane: false,
      });
      expect(readBootstrapConfig(kubeadmConfig(v, 'joinControlPlane'))).to.include({
        hasJoinConfiguration: true,
        joinsControlPlane: true,
      });
      expect(readBootstrapConfig(kubeadmConfig(v, 'worker'))).to.include({
        hasJoinConfiguration: true,
        joinsControlPlane: false,
      });
    });
  }

  it('an empty joinConfiguration is no join configuration (v1beta2 omits it; conversion drops it)', () => {
    const o = kubeadmConfig('v1beta1', 'init');
    o['spec'].joinConfiguration = {};
    expect(readBootstrapConfig(o)).to.include({ hasJoinConfiguration: false, joinsControlPlane: false });
  });

  it("another provider's config carries no join facts", () => {
    const o = {
      apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta1',
      kind: 'TalosConfig',
      metadata: { name: 't', namespace: 'default' },
      spec: {},
    };
    expect(readBootstrapConfig(o)).to.deep.equal({ kind: 'TalosConfig', name: 't', namespace: 'default' });
  });

  it('refuses a malformed config, naming the field', () => {
    const o = kubeadmConfig('v1beta2', 'worker');
    o['spec'].joinConfiguration = 'join';
    expect(() => readBootstrapConfig(o)).to.throw(
      MalformedObjectError,
      /^KubeadmConfig default\/md-0-abc-xyz: field spec\.joinConfiguration: must be an object/,
    );
    const n = kubeadmConfig('v1beta2', 'worker');
    delete n['kind'];
    expect(() => readBootstrapConfig(n))
      .to.throw(MalformedObjectError)
      .with.property('field', 'kind');
  });
});

describe('api/capi readMachineHealthCheck', () => {
  it('v1beta2: checks.nodeStartupTimeoutSeconds and checks.unhealthyMachineConditions', () => {
    expect(readMachineHealthCheck(mhcV1beta2(), 'v1beta2')).to.deep.equal({
      name: 'md-0-mhc',
      namespace: 'default',
      uid: 'uid-mhc-1',
      clusterName: 'c1',
      selector: { matchLabels: { 'cluster.x-k8s.io/deployment-name': 'md-0' } },
      paused: false,
      nodeStartupTimeoutSeconds: 0,
      watchesJoinGuardCondition: true,
    });
  });

  it('v1beta1: spec.nodeStartupTimeout as a duration; unset stays unset (CAPI uses 10m)', () => {
    const o = mhcV1beta1();
    expect(readMachineHealthCheck(o, 'v1beta1')).to.deep.equal({
      name: 'md-0-mhc',
      namespace: 'default',
      uid: 'uid-mhc-1',
      clusterName: 'c1',
      selector: {
        matchExpressions: [{ key: 'cluster.x-k8s.io/deployment-name', operator: 'In', values: ['md-0', 'md-1'] }],
      },
      paused: false,
      watchesJoinGuardCondition: false,
    });
    o['spec'].nodeStartupTimeout = '10m0s';
    o['spec'].unhealthyMachineConditions = [{ type: 'JoinGuardJoined', status: 'False', timeout: '0s' }];
    o['metadata'].annotations = { 'cluster.x-k8s.io/paused': '' };
    expect(readMachineHealthCheck(o, 'v1beta1')).to.include({
      nodeStartupTimeoutSeconds: 600,
      watchesJoinGuardCondition: true,
      paused: true,
    });
    o['spec'].nodeStartupTimeout = '0s';
    expect(readMachineHealthCheck(o, 'v1beta1').nodeStartupTimeoutSeconds).to.equal(0);
  });

  it('refuses a malformed MachineHealthCheck, naming the field', () => {
    const table: [string, (o: Json) => void, string][] = [
      ['v1beta2', (o) => (o['spec'].checks.nodeStartupTimeoutSeconds = '600'), 'spec.checks.nodeStartupTimeoutSeconds'],
      ['v1beta1', (o) => (o['spec'].nodeStartupTimeout = '10'), 'spec.nodeStartupTimeout'],
      [
        'v1beta1',
        (o) => (o['spec'].selector.matchExpressions[0].operator = 'Equals'),
        'spec.selector.matchExpressions[0].operator',
      ],
      ['v1beta2', (o) => (o['spec'].selector.matchLabels = ['a']), 'spec.selector.matchLabels'],
      ['v1beta2', (o) => delete o['spec'].clusterName, 'spec.clusterName'],
    ];
    for (const [v, change, field] of table) {
      const o = v === 'v1beta2' ? mhcV1beta2() : mhcV1beta1();
      change(o);
      expect(() => readMachineHealthCheck(o, v as 'v1beta2' | 'v1beta1'), field)
        .to.throw(MalformedObjectError)
        .with.property('field', field);
    }
  });
});

describe('api/capi matchesSelector', () => {
  const labels = { app: 'web', tier: 'front', 'cluster.x-k8s.io/control-plane': '' };
  const table: [LabelSelectorModel, boolean][] = [
    [{}, true],
    [{ matchLabels: { app: 'web' } }, true],
    [{ matchLabels: { app: 'web', tier: 'back' } }, false],
    [{ matchLabels: { missing: '' } }, false],
    [{ matchLabels: { 'cluster.x-k8s.io/control-plane': '' } }, true],
    [{ matchExpressions: [{ key: 'tier', operator: 'In', values: ['front', 'back'] }] }, true],
    [{ matchExpressions: [{ key: 'tier', operator: 'In', values: ['back'] }] }, false],
    [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }, false],
    [{ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['back'] }] }, true],
    [{ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['front'] }] }, false],
    [{ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }, true],
    [{ matchExpressions: [{ key: 'cluster.x-k8s.io/control-plane', operator: 'Exists' }] }, true],
    [{ matchExpressions: [{ key: 'zone', operator: 'Exists' }] }, false],
    [{ matchExpressions: [{ key: 'zone', operator: 'DoesNotExist' }] }, true],
    [{ matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] }, false],
    [{ matchLabels: { app: 'web' }, matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web'] }] }, false],
    [{ matchLabels: { toString: 'x' } }, false],
    [{ matchExpressions: [{ key: 'a', operator: 'Bogus' as 'In' }] }, false],
  ];
  for (const [sel, want] of table) {
    it(`${JSON.stringify(sel)} -> ${want}`, () => expect(matchesSelector(sel, labels)).to.equal(want));
  }
});
