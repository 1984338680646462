// A shard as docs/install.md installs it: `clusterctl generate yaml --from shard-components.yaml` with
// JOINGUARD_SHARD set (clusterctl itself, v1.14.2), refused without it, and its objects accepted by the real
// kube-apiserver (server-side apply, dry run). manifests/shard.test.ts holds the shard's properties.
import { expect } from 'chai';
import { clusterctlSubstitute } from '../../manifests/clusterctl.js';
import { objectsOf, renderProviderFiles } from '../../manifests/render.js';
import { ensureBuilt } from '../../hack/testenv/testenv.js';
import { getTestEnv } from '../support/testenv.js';
import { pathOf, raw } from './install-env.js';

describe('install: a shard from shard-components.yaml, through clusterctl', function () {
  this.timeout(120_000);

  it('clusterctl refuses it without JOINGUARD_SHARD, substitutes it with one, and the apiserver accepts the objects', async () => {
    const clusterctl = `${await ensureBuilt((l) => process.stderr.write(`${l}\n`), 'v1.14')}/clusterctl`;
    const { shard } = await renderProviderFiles('0.1.0');
    let err: Error | undefined;
    await clusterctlSubstitute(clusterctl, shard, {}).catch((e: Error) => (err = e));
    expect(err?.message).to.match(/JOINGUARD_SHARD/);

    const text = await clusterctlSubstitute(clusterctl, shard, {
      JOINGUARD_SHARD: 'shard-b',
      JOINGUARD_NAMESPACE: 'default',
    });
    const objs = objectsOf(text);
    expect(objs.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`)).to.deep.equal([
      'Deployment/default/joinguard-controller-manager-shard-b',
      'PodDisruptionBudget/default/joinguard-controller-manager-shard-b',
    ]);
    const admin = (await getTestEnv()).kubeConfig();
    for (const o of objs) {
      const res = await raw(
        admin,
        'PATCH',
        `${await pathOf(admin, o)}?fieldManager=test&dryRun=All`,
        JSON.stringify(o),
        'application/apply-patch+yaml',
      );
      expect(res.status, `${o.kind}: ${res.body.slice(0, 300)}`).to.be.oneOf([200, 201]);
    }
  });
});
