// CAPI discovery against a FAKE apiserver (served versions, clusterctl's inventory, a published schema cut
// down to the marker fields). e2e/runtime/discovery.test.ts runs it against the real apiserver with CAPI
// v1.14.2's managers and with the CRDs of v1.8.4, v1.9.0 and v1.10.10.
import { expect } from 'chai';
import { discoverCapi, hasPath, SCHEMA_MARKERS } from './discovery.js';
import { RestClient, type Json } from './rest.js';
import { closedAfterEach, schemaWith, sendJson, serve } from '../testing/http-server.js';

const fieldsOf = (minor: number, apiVersion: string) =>
  SCHEMA_MARKERS.filter((m) => m.minor <= minor && m.version === apiVersion)
    .map((m) => `${m.kind}:${m.path}`)
    .concat('Machine:spec', 'MachineHealthCheck:spec');

describe('discoverCapi (fake apiserver)', () => {
  const keep = closedAfterEach();

  async function discover(o: {
    served?: string[];
    inventory?: Json[] | 403;
    schema?: Json;
    kubeadm?: boolean;
    schemaLate?: number;
  }) {
    let schemaAsked = 0;
    const server = keep(
      await serve((_req, res, url) => {
        const p = url.pathname;
        if (p === '/apis/cluster.x-k8s.io')
          return o.served
            ? sendJson(res, 200, { versions: o.served.map((version) => ({ version })) })
            : sendJson(res, 404, {});
        if (p === '/apis/controlplane.cluster.x-k8s.io' || p === '/apis/bootstrap.cluster.x-k8s.io') {
          return o.kubeadm
            ? sendJson(res, 200, { versions: (o.served ?? []).map((version) => ({ version })) })
            : sendJson(res, 404, {});
        }
        if (p === '/apis/clusterctl.cluster.x-k8s.io/v1alpha3/providers') {
          if (o.inventory === 403) return sendJson(res, 403, { message: 'forbidden' });
          return o.inventory ? sendJson(res, 200, { items: o.inventory }) : sendJson(res, 404, {});
        }
        if (p.startsWith('/openapi/v3/apis/cluster.x-k8s.io/') && o.schema && ++schemaAsked > (o.schemaLate ?? 0))
          return sendJson(res, 200, o.schema);
        sendJson(res, 404, { message: `no ${p}` });
      }),
    );
    return discoverCapi(keep(new RestClient(server.access, { userAgent: 'test' })));
  }

  it('clusterctl inventory: the exact release of the core provider', async () => {
    const info = await discover({
      served: ['v1beta1', 'v1beta2'],
      kubeadm: true,
      inventory: [
        {
          metadata: { namespace: 'capi-kubeadm-control-plane-system', name: 'control-plane-kubeadm' },
          providerName: 'kubeadm',
          type: 'ControlPlaneProvider',
          version: 'v1.13.0',
        },
        {
          metadata: { namespace: 'capi-system', name: 'cluster-api' },
          providerName: 'cluster-api',
          type: 'CoreProvider',
          version: 'v1.14.2',
        },
      ],
    });
    expect(info).to.deep.equal({
      apiVersion: 'v1beta2',
      served: ['v1beta1', 'v1beta2'],
      minor: 14,
      version: 'v1.14.2',
      source: 'clusterctl inventory (Provider capi-system/cluster-api)',
      kubeadmControlPlane: true,
      kubeadmBootstrap: true,
    });
  });

  for (const minor of [14, 13, 12, 11]) {
    it(`no inventory (or forbidden): v1.${minor} from the v1beta2 schema`, async () => {
      const info = await discover({
        served: ['v1beta1', 'v1beta2'],
        inventory: minor % 2 ? 403 : undefined,
        schema: schemaWith('v1beta2', fieldsOf(minor, 'v1beta2')),
      });
      expect(info.minor).to.equal(minor);
      expect(info.version).to.equal(undefined);
      expect(info.source).to.match(
        new RegExp(`cluster.x-k8s.io/v1beta2 schema \\(OpenAPI v3\\): .* \\(v1.${minor}\\+\\)`),
      );
    });
  }

  it('v1beta1 only: v1.10 and v1.9 from the v1beta1 schema', async () => {
    expect(
      (await discover({ served: ['v1beta1'], schema: schemaWith('v1beta1', fieldsOf(10, 'v1beta1')) })).minor,
    ).to.equal(10);
    const nine = await discover({ served: ['v1beta1'], schema: schemaWith('v1beta1', fieldsOf(9, 'v1beta1')) });
    expect([nine.apiVersion, nine.minor]).to.deep.equal(['v1beta1', 9]);
  });

  it('a schema not published yet (404 right after the CRDs were created) is asked again', async () => {
    const info = await discover({
      served: ['v1beta1', 'v1beta2'],
      schema: schemaWith('v1beta2', fieldsOf(14, 'v1beta2')),
      schemaLate: 1,
    });
    expect(info.minor).to.equal(14);
  });

  it('refuses v1.8 (no status.v1beta2) and a clusterctl inventory saying v1.8, naming the reason', async () => {
    const e = await discover({ served: ['v1beta1'], schema: schemaWith('v1beta1', ['Machine:spec']) }).catch(
      (err: Error) => err,
    );
    expect((e as Error).message).to.match(
      /unsupported CAPI: found v1.8 or older .*Machine has no status.v1beta2.*supports CAPI v1.9 and later: v1.8 and older set no condition when the workload cluster cannot be reached/,
    );
    const e2 = await discover({
      served: ['v1beta1'],
      inventory: [
        {
          metadata: { namespace: 'capi-system', name: 'cluster-api' },
          providerName: 'cluster-api',
          type: 'CoreProvider',
          version: 'v1.8.4',
        },
      ],
    }).catch((err: Error) => err);
    expect((e2 as Error).message).to.match(/unsupported CAPI: found v1.8 \(v1.8.4\) from clusterctl inventory/);
  });

  it('not installed, or only pre-v1beta1 versions: a clear error', async () => {
    expect(((await discover({}).catch((e: Error) => e)) as Error).message).to.match(/CAPI is not installed/);
    expect(((await discover({ served: ['v1alpha4'] }).catch((e: Error) => e)) as Error).message).to.match(
      /serves v1alpha4 only/,
    );
  });

  it('hasPath follows properties, items and $ref', () => {
    const schemas = {
      A: { properties: { spec: { $ref: '#/components/schemas/B' } } },
      B: { properties: { gates: { items: { allOf: [{ $ref: '#/components/schemas/C' }] } } } },
      C: { properties: { polarity: {} } },
    };
    expect(hasPath(schemas.A, 'spec.gates[].polarity', schemas)).to.equal(true);
    expect(hasPath(schemas.A, 'spec.gates[].other', schemas)).to.equal(false);
  });
});
