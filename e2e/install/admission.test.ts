// The admission webhooks called by the real kube-apiserver: the add-on's own webhook configurations, pointed
// at the webhook server run here (url + caBundle of the test CA), with its lookups made under the add-on's
// ServiceAccount. Every bad MachineJoinCheck is refused with a message that names the field; good ones are
// admitted, defaulted, and warned about where DESIGN.md says so.
import { expect } from 'chai';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { install, raw, type Installed } from './install-env.js';

type Json = Record<string, any>;
const CN = 'cluster.x-k8s.io/cluster-name';
const MD = 'cluster.x-k8s.io/deployment-name';
const CP = 'cluster.x-k8s.io/control-plane';
const CPN = 'cluster.x-k8s.io/control-plane-name';

interface Bad {
  name: string;
  spec: Json;
  /** The field the refusal must name. */
  field: string;
  /** More the message must say (what was wrong, what would be accepted). */
  says?: RegExp;
}

const base = (selector: Json = { matchLabels: { [MD]: 'md-bad' } }) => ({ clusterName: 'c1', selector });
const expr = (key: string, operator: string, values?: string[]) => ({ matchExpressions: [{ key, operator, ...(values ? { values } : {}) }] });

/** Refused on create; the existing checks (below) are workers-md-0 and control-plane of Cluster c1. */
const BAD: Bad[] = [
  // what the CRD schema and the API's validateSpec refuse
  { name: 'no clusterName', spec: { selector: {} }, field: 'spec.clusterName' },
  { name: 'empty clusterName', spec: { ...base(), clusterName: '' }, field: 'spec.clusterName' },
  { name: 'no selector', spec: { clusterName: 'c1' }, field: 'spec.selector' },
  { name: 'joinTimeout not a duration', spec: { ...base(), joinTimeout: 'soon' }, field: 'spec.joinTimeout' },
  { name: 'joinTimeout negative', spec: { ...base(), joinTimeout: '-5m' }, field: 'spec.joinTimeout' },
  { name: 'joinTimeout zero', spec: { ...base(), joinTimeout: '0s' }, field: 'spec.joinTimeout' },
  { name: 'joinTimeout without unit', spec: { ...base(), joinTimeout: '20' }, field: 'spec.joinTimeout' },
  { name: 'joinTimeout a number', spec: { ...base(), joinTimeout: 1200 }, field: 'spec.joinTimeout' },
  { name: 'provisionTimeout not a duration', spec: { ...base(), provisionTimeout: 'forever' }, field: 'spec.provisionTimeout' },
  { name: 'maxInFlight zero', spec: { ...base(), maxInFlight: 0 }, field: 'spec.maxInFlight' },
  { name: 'maxInFlight negative', spec: { ...base(), maxInFlight: -1 }, field: 'spec.maxInFlight' },
  { name: 'maxInFlight over 100%', spec: { ...base(), maxInFlight: '150%' }, field: 'spec.maxInFlight' },
  { name: 'maxInFlight 0%', spec: { ...base(), maxInFlight: '0%' }, field: 'spec.maxInFlight' },
  { name: 'maxInFlight a word', spec: { ...base(), maxInFlight: 'many' }, field: 'spec.maxInFlight' },
  { name: 'unknown remediation strategy', spec: { ...base(), remediation: { strategy: 'Reboot' } }, field: 'spec.remediation.strategy', says: /Auto/ },
  { name: 'maxPerOwner negative', spec: { ...base(), remediation: { maxPerOwner: -1 } }, field: 'spec.remediation.maxPerOwner' },
  { name: 'remediation window not a duration', spec: { ...base(), remediation: { window: '1 day' } }, field: 'spec.remediation.window' },
  { name: 'consecutiveJoinFailures negative', spec: { ...base(), suspicion: { consecutiveJoinFailures: -1 } }, field: 'spec.suspicion.consecutiveJoinFailures' },
  { name: 'probeInterval not a duration', spec: { ...base(), suspicion: { probeInterval: 'often' } }, field: 'spec.suspicion.probeInterval' },
  { name: 'maxProbeInterval below probeInterval', spec: { ...base(), suspicion: { probeInterval: '2h', maxProbeInterval: '30m' } }, field: 'spec.suspicion.maxProbeInterval' },
  { name: 'neverJoinedLimit negative', spec: { ...base(), neverJoinedLimit: -2 }, field: 'spec.neverJoinedLimit' },
  { name: 'unknown firstControlPlane policy', spec: { ...base(), firstControlPlane: 'Delete' }, field: 'spec.firstControlPlane', says: /Remediate/ },
  { name: 'dryRun not a boolean', spec: { ...base(), dryRun: 'yes' }, field: 'spec.dryRun' },
  { name: 'paused not a boolean', spec: { ...base(), paused: 1 }, field: 'spec.paused' },
  { name: 'unknown selector operator', spec: base(expr('pool', 'Like', ['a'])), field: 'spec.selector.matchExpressions[0]' },
  { name: 'In without values', spec: base(expr('pool', 'In')), field: 'spec.selector.matchExpressions[0]' },
  { name: 'Exists with values', spec: base(expr('pool', 'Exists', ['a'])), field: 'spec.selector.matchExpressions[0]' },
  // what only the webhook can say
  { name: 'matchLabels of another Cluster', spec: base({ matchLabels: { [CN]: 'c2', [MD]: 'md-9' } }), field: `spec.selector.matchLabels[${JSON.stringify(CN)}]`, says: /is "c2" but spec.clusterName is "c1".*remove this requirement or make it admit "c1"/ },
  { name: 'NotIn the own Cluster', spec: base({ matchLabels: { [MD]: 'md-9' }, ...expr(CN, 'NotIn', ['c1']) }), field: 'spec.selector.matchExpressions[0]', says: /NotIn "c1" excludes every Machine/ },
  { name: 'DoesNotExist of the Cluster label', spec: base({ matchLabels: { [MD]: 'md-9' }, ...expr(CN, 'DoesNotExist') }), field: 'spec.selector.matchExpressions[0]', says: /DoesNotExist selects no Machine/ },
  { name: 'In other Clusters only', spec: base({ matchLabels: { [MD]: 'md-9' }, ...expr(CN, 'In', ['c2', 'c3']) }), field: 'spec.selector.matchExpressions[0]', says: /does not include "c1"/ },
  { name: 'the same Machines as workers-md-0', spec: base({ matchLabels: { [MD]: 'md-0' } }), field: 'spec.selector', says: /overlaps MachineJoinCheck "workers-md-0".*accepted is a selector that excludes its Machines/ },
  { name: 'a subset of workers-md-0', spec: base({ matchLabels: { [MD]: 'md-0', zone: 'a' } }), field: 'spec.selector', says: /overlaps MachineJoinCheck "workers-md-0"/ },
  { name: 'an empty selector (every Machine of the Cluster)', spec: base({}), field: 'spec.selector', says: /must not be empty/ },
  { name: 'every MachineDeployment Machine', spec: base(expr(MD, 'Exists')), field: 'spec.selector', says: /overlaps MachineJoinCheck "workers-md-0"/ },
  { name: 'a label another check does not exclude', spec: base({ matchLabels: { team: 'a' } }), field: 'spec.selector', says: /a Machine could carry labels that satisfy both selectors/ },
  { name: 'an existing Machine both select', spec: base({ matchLabels: { odd: 'yes' }, matchExpressions: [{ key: MD, operator: 'In', values: ['md-7'] }] }), field: 'spec.selector', says: /overlaps MachineJoinCheck "odd-cp".*both select Machine "odd-machine"/ },
];

describe('install: admission of MachineJoinChecks by the real kube-apiserver', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let installed: Installed;
  const ns = `jg-admission-${process.pid}`;
  const path = `/apis/joinguard.io/v1alpha1/namespaces/${ns}/machinejoinchecks`;
  const mjc = (name: string, spec: Json, metadata: Json = {}) => ({ apiVersion: 'joinguard.io/v1alpha1', kind: 'MachineJoinCheck', metadata: { name, ...metadata }, spec });
  const create = (name: string, spec: Json) => raw(env.kubeConfig(), 'POST', path, mjc(name, spec));

  before(async () => {
    env = await getTestEnv();
    installed = await install(env, ns);
    const admin = env.kubeConfig();
    // Existing checks the overlap cases meet.
    for (const [name, selector] of [
      ['workers-md-0', { matchLabels: { [MD]: 'md-0' } }],
      ['control-plane', { matchLabels: { [CPN]: 'kcp-1' }, ...expr(CP, 'Exists') }],
      ['odd-cp', { matchLabels: { odd: 'yes', [CPN]: 'kcp-odd' }, ...expr(CP, 'Exists') }],
    ] as const) {
      const res = await create(name, { clusterName: 'c1', selector });
      expect(res.status, `${name}: ${res.body}`).to.equal(201);
    }
    // A Machine that breaks CAPI's label conventions (control plane and MachineDeployment at once).
    const m = await raw(admin, 'POST', `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines`, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Machine',
      metadata: { name: 'odd-machine', labels: { [CN]: 'c1', [CP]: '', [CPN]: 'kcp-odd', [MD]: 'md-7', odd: 'yes' } },
      spec: {
        clusterName: 'c1',
        bootstrap: { dataSecretName: 'odd-bootstrap' },
        infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'FakeMachine', name: 'odd' },
      },
    });
    expect(m.status, m.body).to.equal(201);
  });
  after(async () => {
    await installed?.uninstall();
  });

  it(`has at least 30 refusals in its table (${BAD.length})`, () => {
    expect(BAD.length).to.be.at.least(30);
  });

  for (const c of BAD) {
    it(`refuses: ${c.name} (${c.field})`, async () => {
      const res = await create(`bad-${BAD.indexOf(c)}`, c.spec);
      const body = JSON.parse(res.body) as { code: number; reason: string; message: string };
      expect(res.status, res.body).to.equal(422);
      expect(body.reason).to.equal('Invalid');
      expect(body.message, body.message).to.include(c.field);
      if (c.says) expect(body.message).to.match(c.says);
    });
  }

  it('refuses a change of clusterName, saying what is accepted', async () => {
    // The CRD's CEL rule answers before the validating webhook (whose own check, with the old and new names,
    // is the backstop pinned in webhooks/validate.test.ts).
    const admin = env.kubeConfig();
    const res = await raw(admin, 'PATCH', `${path}/workers-md-0`, JSON.stringify({ spec: { clusterName: 'c2' } }), 'application/merge-patch+json');
    expect(res.status, res.body).to.equal(422);
    expect(JSON.parse(res.body).message).to.match(/spec\.clusterName: .*clusterName is immutable; create a new MachineJoinCheck for another Cluster/);
  });

  it('refuses an update that makes a selector overlap another check', async () => {
    const res = await raw(env.kubeConfig(), 'PATCH', `${path}/control-plane`, JSON.stringify({ spec: { selector: { matchLabels: null, matchExpressions: [{ key: 'pool', operator: 'Exists' }] } } }), 'application/merge-patch+json');
    expect(res.status, res.body).to.equal(422);
    expect(JSON.parse(res.body).message).to.match(/spec\.selector: overlaps MachineJoinCheck "workers-md-0"/);
  });

  it('admits a minimal check and stores it defaulted and labelled with its Cluster', async () => {
    const res = await create('workers-md-1', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-1' } } });
    expect(res.status, res.body).to.equal(201);
    expect(res.warnings).to.deep.equal([]);
    const stored = JSON.parse(res.body) as Json;
    expect(stored.metadata.labels).to.deep.equal({ [CN]: 'c1' });
    expect(stored.spec).to.deep.include({ joinTimeout: '20m', maxInFlight: 1, neverJoinedLimit: 3, firstControlPlane: 'Remediate', dryRun: false, paused: false });
    expect(stored.spec.remediation).to.deep.equal({ strategy: 'Auto', maxPerOwner: 5, window: '24h' });
    expect(stored.spec.suspicion).to.deep.equal({ consecutiveJoinFailures: 2, probeInterval: '30m', maxProbeInterval: '8h' });
    expect(stored.spec).not.to.have.property('provisionTimeout');
  });

  it('admits a joinTimeout under 2m with a warning', async () => {
    const res = await create('quick', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-2' } }, joinTimeout: '90s' });
    expect(res.status, res.body).to.equal(201);
    expect(res.warnings.join('\n')).to.match(/joinTimeout/).and.match(/2m/);
  });

  it('admits with a warning a check that a MachineHealthCheck with an unset node startup timeout also selects', async () => {
    const admin = env.kubeConfig();
    const mhcPath = `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machinehealthchecks`;
    const mhc = (name: string, selector: Json, checks: Json) =>
      raw(admin, 'POST', mhcPath, { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineHealthCheck', metadata: { name }, spec: { clusterName: 'c1', selector, checks } });
    const unhealthy = { unhealthyNodeConditions: [{ type: 'Ready', status: 'Unknown', timeoutSeconds: 300 }] };
    for (const r of [
      await mhc('md-3-default', { matchLabels: { [MD]: 'md-3' } }, unhealthy),
      await mhc('md-4-off', { matchLabels: { [MD]: 'md-4' } }, { ...unhealthy, nodeStartupTimeoutSeconds: 0 }),
    ]) expect(r.status, r.body).to.equal(201);

    const warned = await create('md-3', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-3' } } });
    expect(warned.status, warned.body).to.equal(201);
    expect(warned.warnings).to.have.length(1);
    // CAPI's own MHC defaulting has written 600 into the unset timeout.
    expect(warned.warnings[0]).to.match(/MachineHealthCheck "md-3-default" also selects these Machines.*600s \(CAPI's default\).*set its nodeStartupTimeout explicitly to 0/);

    const quiet = await create('md-4', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-4' } } });
    expect(quiet.status, quiet.body).to.equal(201);
    expect(quiet.warnings).to.deep.equal([]);
  });

  it('admits a control-plane check next to worker checks (CAPI ownership labels keep them apart)', async () => {
    const res = await create('cp-kcp-2', { clusterName: 'c1', selector: { matchLabels: { [CPN]: 'kcp-2' }, ...expr(CP, 'Exists') } });
    expect(res.status, res.body).to.equal(201);
  });

  it('admits a metadata-only update (resume annotation) without judging the spec again', async () => {
    const res = await raw(env.kubeConfig(), 'PATCH', `${path}/workers-md-0`, JSON.stringify({ metadata: { annotations: { 'joinguard.io/resume': '1' } } }), 'application/merge-patch+json');
    expect(res.status, res.body).to.equal(200);
  });

  it('lets the controller write status without the webhooks (the /status subresource is not sent to them)', async () => {
    // A whole-status update with the read resourceVersion, as the controller writes it, under its identity.
    const current = JSON.parse((await raw(env.kubeConfig(), 'GET', `${path}/workers-md-0`)).body) as Json;
    const res = await raw(installed.sa, 'PUT', `${path}/workers-md-0/status`, { ...current, status: { expectedMachines: 0 } });
    expect(res.status, res.body).to.equal(200);
    expect(res.warnings).to.deep.equal([]);
  });
});
